#include "io/rank_shard_source.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "io/internal/dataset_position.h"

namespace ember::io {
namespace {

// A column of `batch` as the blocks of an AllToAllV: per destination, its
// examples' `per_example` elements each.
std::vector<int64_t> Scaled(const std::vector<int64_t>& examples, int64_t per_example) {
  std::vector<int64_t> counts(examples.size());
  for (size_t q = 0; q < examples.size(); ++q) counts[q] = examples[q] * per_example;
  return counts;
}

// Sends the examples of `send` (send_examples[q] of them to rank q, in
// rank order, with their indices) and receives the others' into *recv and
// *recv_indices, in rank order: one AllToAllV per column.
Status SwapExamples(Communicator& comm, const ExampleShape& shape, Batch send,
                    const std::vector<int64_t>& send_examples,
                    const std::vector<int64_t>& send_indices, Batch* recv,
                    std::vector<int64_t>* recv_indices) {
  const int n = comm.size();
  std::vector<int64_t> bags(send.size * shape.num_slots);
  std::vector<int64_t> send_keys(n, 0);
  for (int64_t e = 0, k = 0, q = 0; q < n; ++q) {
    for (int64_t i = 0; i < send_examples[q]; ++i, ++e) {
      for (int s = 0; s < shape.num_slots; ++s, ++k) {
        bags[k] = send.BagSize(e, s);
        send_keys[q] += bags[k];
      }
    }
  }
  std::vector<int64_t> recv_examples;
  EMBER_RETURN_IF_ERROR(
      AllToAllVUnknownCounts(comm, send_indices, send_examples, recv_indices, &recv_examples));
  const int64_t total = static_cast<int64_t>(recv_indices->size());
  recv->Clear(shape.num_dense, shape.num_slots, shape.num_labels);
  recv->size = total;
  recv->labels.resize(total * shape.num_labels);
  recv->dense.resize(total * shape.num_dense);
  std::vector<int64_t> recv_bags(total * shape.num_slots);
  EMBER_RETURN_IF_ERROR(comm.AllToAllV(send.labels, Scaled(send_examples, shape.num_labels),
                                       recv->labels, Scaled(recv_examples, shape.num_labels)));
  EMBER_RETURN_IF_ERROR(comm.AllToAllV(send.dense, Scaled(send_examples, shape.num_dense),
                                       recv->dense, Scaled(recv_examples, shape.num_dense)));
  EMBER_RETURN_IF_ERROR(comm.AllToAllV(bags, Scaled(send_examples, shape.num_slots), recv_bags,
                                       Scaled(recv_examples, shape.num_slots)));
  EMBER_RETURN_IF_ERROR(AllToAllVUnknownCounts(comm, send.keys, send_keys, &recv->keys));
  send = Batch();
  recv->offsets.resize(recv_bags.size() + 1);
  recv->offsets[0] = 0;
  for (size_t k = 0; k < recv_bags.size(); ++k) {
    recv->offsets[k + 1] = recv->offsets[k] + recv_bags[k];
  }
  if (recv->offsets.back() != static_cast<int64_t>(recv->keys.size())) {
    return Status::Internal("swapping examples: rank ", comm.rank(), " received ",
                            recv->keys.size(), " keys for bags of ", recv->offsets.back());
  }
  return Status::OK();
}

}  // namespace

Result<Dataset> AllGatherExamples(Communicator& comm, const Dataset& mine,
                                  const std::vector<int64_t>& indices, ExampleShape shape) {
  if (static_cast<int64_t>(indices.size()) != mine.size()) {
    return Status::InvalidArgument("all-gathering examples: ", mine.size(), " examples but ",
                                   indices.size(), " indices");
  }
  const int n = comm.size();
  std::vector<int64_t> copies, send_indices;
  for (int q = 0; q < n; ++q) {
    for (int64_t j = 0; j < mine.size(); ++j) copies.push_back(j);
    send_indices.insert(send_indices.end(), indices.begin(), indices.end());
  }
  Batch send;
  send.Clear(shape.num_dense, shape.num_slots, shape.num_labels);
  if (mine.size() > 0) mine.GatherBatch(copies, &send);
  Batch recv;
  std::vector<int64_t> recv_indices;
  EMBER_RETURN_IF_ERROR(SwapExamples(comm, shape, std::move(send),
                                     std::vector<int64_t>(n, mine.size()), send_indices, &recv,
                                     &recv_indices));
  std::vector<int64_t> order(recv.size);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return recv_indices[a] < recv_indices[b]; });
  Batch all;
  all.Clear(shape.num_dense, shape.num_slots, shape.num_labels);
  if (recv.size > 0) Dataset(std::move(recv)).GatherBatch(order, &all);
  return Dataset(std::move(all), mine.bad_lines());
}

Result<std::unique_ptr<RankShardBatchSource>> RankShardBatchSource::Make(
    Dataset share, std::vector<int64_t> indices, int64_t examples, ExampleShape shape,
    const DatasetBatchSourceOptions& global, Communicator* comm) {
  if (comm == nullptr) return Status::InvalidArgument("rank shard source: no communicator");
  if (global.batch_size < 1 || global.num_epochs < 0) {
    return Status::InvalidArgument("rank shard source: batch size ", global.batch_size,
                                   " and epochs ", global.num_epochs, " (need >= 1 and >= 0)");
  }
  if (static_cast<int64_t>(indices.size()) != share.size()) {
    return Status::InvalidArgument("rank shard source: ", share.size(), " examples but ",
                                   indices.size(), " indices");
  }
  for (int64_t i : indices) {
    if (i < 0 || i >= examples) {
      return Status::InvalidArgument("rank shard source: example index ", i, " is outside the ",
                                     examples, " examples of the data");
    }
  }
  if (share.size() > 0 &&
      (share.num_dense() != shape.num_dense || share.num_slots() != shape.num_slots ||
       share.num_labels() != shape.num_labels)) {
    return Status::InvalidArgument("rank shard source: the share's examples have ",
                                   share.num_dense(), " dense features, ", share.num_slots(),
                                   " slots and ", share.num_labels(), " labels, not ",
                                   shape.num_dense, ", ", shape.num_slots, " and ",
                                   shape.num_labels);
  }
  return std::unique_ptr<RankShardBatchSource>(new RankShardBatchSource(
      std::move(share), std::move(indices), examples, shape, global, comm));
}

RankShardBatchSource::RankShardBatchSource(Dataset share, std::vector<int64_t> indices,
                                           int64_t examples, ExampleShape shape,
                                           const DatasetBatchSourceOptions& global,
                                           Communicator* comm)
    : held_(std::move(share)),
      indices_(std::move(indices)),
      examples_(examples),
      shape_(shape),
      options_(global),
      comm_(comm),
      rank_(comm->rank()),
      ranks_(comm->size()),
      next_(examples) {}

int64_t RankShardBatchSource::EstimatedBatches() const {
  return (examples_ + options_.batch_size - 1) / options_.batch_size * options_.num_epochs;
}

int RankShardBatchSource::OwnerOf(int64_t p, int64_t start) const {
  const int64_t begin = start + (p - start) / options_.batch_size * options_.batch_size;
  const int64_t b = std::min(options_.batch_size, examples_ - begin);
  const int64_t o = p - begin;
  // Rank r's slice is [r b / n, (r + 1) b / n) (RankSliceBatchSource).
  int r = static_cast<int>(o * ranks_ / b);
  while (r + 1 < ranks_ && (r + 1) * b / ranks_ <= o) ++r;
  while (r > 0 && r * b / ranks_ > o) --r;
  return r;
}

Status RankShardBatchSource::PlaceEpoch(int64_t epoch, int64_t start) {
  // In order, every epoch from the same start places every example where the
  // last did (every rank decides alike: no exchange).
  if (!options_.shuffle && placed_start_ == start) {
    local_next_ = 0;
    return Status::OK();
  }
  placed_start_ = -1;  // Until this swap is done.
  const int n = ranks_;
  std::vector<int64_t> position;  // Per example of the whole data: its place this epoch.
  {
    std::vector<int64_t> order;
    internal::EpochOrder(examples_, options_.shuffle, options_.seed, epoch, &order);
    position.resize(examples_);
    for (int64_t p = 0; p < examples_; ++p) position[order[p]] = p;
  }
  // Where each held example goes: the rank of its slice, or nowhere (before
  // `start`: not read this epoch, it stays).
  const auto destination = [&](int64_t index) {
    const int64_t p = position[index];
    return p >= start ? OwnerOf(p, start) : rank_;
  };
  std::vector<int64_t> send_order(held_.size());
  std::iota(send_order.begin(), send_order.end(), 0);
  std::vector<int> dest(held_.size());
  for (int64_t j = 0; j < held_.size(); ++j) dest[j] = destination(indices_[j]);
  std::stable_sort(send_order.begin(), send_order.end(),
                   [&](int64_t a, int64_t b) { return dest[a] < dest[b]; });
  std::vector<int64_t> send_examples(n, 0), send_indices(held_.size());
  for (size_t k = 0; k < send_order.size(); ++k) {
    ++send_examples[dest[send_order[k]]];
    send_indices[k] = indices_[send_order[k]];
  }
  Batch send;
  send.Clear(shape_.num_dense, shape_.num_slots, shape_.num_labels);
  if (held_.size() > 0) held_.GatherBatch(send_order, &send);
  held_ = Dataset();
  indices_.clear();
  indices_.shrink_to_fit();
  std::vector<int64_t> recv_indices;
  Batch recv;
  EMBER_RETURN_IF_ERROR(SwapExamples(*comm_, shape_, std::move(send), send_examples, send_indices,
                                     &recv, &recv_indices));
  const int64_t total = recv.size;
  // This epoch's examples in slice order, then those it does not read.
  std::vector<int64_t> keep(total);
  std::iota(keep.begin(), keep.end(), 0);
  const auto rank_of = [&](int64_t j) {
    const int64_t p = position[recv_indices[j]];
    return std::pair<bool, int64_t>(p < start, p);
  };
  std::sort(keep.begin(), keep.end(),
            [&](int64_t a, int64_t b) { return rank_of(a) < rank_of(b); });
  used_ = 0;
  for (int64_t j : keep) {
    const int64_t p = position[recv_indices[j]];
    if (p < start) continue;
    if (OwnerOf(p, start) != rank_ ||
        (used_ > 0 && position[recv_indices[keep[used_ - 1]]] == p)) {
      return Status::InvalidArgument("rank shard source: rank ", rank_, " received example ",
                                     recv_indices[j], " of epoch ", epoch, " twice or wrongly: ",
                                     "the ranks' shares do not partition the data");
    }
    ++used_;
  }
  int64_t expected = 0;
  for (int64_t begin = start; begin < examples_; begin += options_.batch_size) {
    const int64_t b = std::min(options_.batch_size, examples_ - begin);
    expected += (rank_ + 1) * b / n - rank_ * b / n;
  }
  if (used_ != expected) {
    return Status::InvalidArgument("rank shard source: rank ", rank_, " holds ", used_,
                                   " examples of its slices of epoch ", epoch, " but they have ",
                                   expected, ": the ranks' shares do not partition the data");
  }
  Batch placed;
  placed.Clear(shape_.num_dense, shape_.num_slots, shape_.num_labels);
  if (total > 0) Dataset(std::move(recv)).GatherBatch(keep, &placed);
  held_ = Dataset(std::move(placed));
  indices_.resize(total);
  for (int64_t k = 0; k < total; ++k) indices_[k] = recv_indices[keep[k]];
  local_next_ = 0;
  placed_start_ = start;
  return Status::OK();
}

Result<bool> RankShardBatchSource::Next(Batch* out) {
  if (next_ >= examples_) {
    if (epoch_ + 1 >= options_.num_epochs || examples_ == 0) return false;
    ++epoch_;
    next_ = 0;
    start_ = 0;
    EMBER_RETURN_IF_ERROR(PlaceEpoch(epoch_, start_));
  }
  const int64_t end = std::min(examples_, next_ + options_.batch_size);
  const int64_t b = end - next_;
  const int64_t mine = (rank_ + 1) * b / ranks_ - rank_ * b / ranks_;
  held_.GetBatch(local_next_, local_next_ + mine, out);
  local_next_ += mine;
  next_ = end;
  return true;
}

Result<std::string> RankShardBatchSource::ResumePosition() const {
  return internal::DatasetPositionText(
      {examples_, options_.batch_size, options_.shuffle, options_.seed, epoch_, next_});
}

Status RankShardBatchSource::ResumeFrom(std::string_view text) {
  EMBER_ASSIGN_OR_RETURN(const internal::DatasetPosition position,
                         internal::CheckDatasetPosition(text, examples_, options_));
  epoch_ = position.epoch;
  next_ = position.next;
  start_ = next_;
  if (epoch_ >= 0 && next_ < examples_) EMBER_RETURN_IF_ERROR(PlaceEpoch(epoch_, start_));
  return Status::OK();
}

}  // namespace ember::io
