#include "io/elastic_stream_source.h"

#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "io/batch.h"

namespace ember::io {
namespace {

constexpr char kResharded[] = "resharded_stream";

// The old shards' positions of a job resumed on another number of ranks.
struct ReshardedPositions {
  std::vector<std::string> positions;
};

void to_json(Json& j, const ReshardedPositions& r) { j = Json{{kResharded, r.positions}}; }

void from_json(const Json& j, ReshardedPositions& r) {
  JsonFields f(j);
  f.Get(kResharded, &r.positions);
  f.Done();
}

// The old shards' positions of a resharded position, and *resharded; an
// empty list and !*resharded when `text` is not one.
Result<std::vector<StreamPosition>> ParseResharded(std::string_view text, bool* resharded) {
  *resharded = false;
  if (text.find(kResharded) == std::string_view::npos) return std::vector<StreamPosition>();
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseJsonText(std::string(text)));
  if (!json.is_object() || !json.contains(kResharded)) return std::vector<StreamPosition>();
  *resharded = true;
  Result<ReshardedPositions> list = FromJson<ReshardedPositions>(json);
  if (!list.ok()) return list.status().WithContext("a resharded stream position");
  if (list->positions.empty()) {
    return Status::InvalidArgument("a resharded stream position needs a list of positions");
  }
  std::vector<StreamPosition> positions;
  for (size_t r = 0; r < list->positions.size(); ++r) {
    Result<StreamPosition> position = StreamPosition::Parse(list->positions[r]);
    if (!position.ok()) {
      return position.status().WithContext("resharded stream position of old rank " +
                                           std::to_string(r));
    }
    positions.push_back(*std::move(position));
  }
  return positions;
}

}  // namespace

Result<std::string> ReshardedStreamPosition(const std::vector<std::string>& rank_positions) {
  if (rank_positions.empty()) return Status::InvalidArgument("no positions to reshard");
  bool resharded = false;
  EMBER_RETURN_IF_ERROR(ParseResharded(rank_positions[0], &resharded).status());
  if (resharded) {
    for (size_t r = 1; r < rank_positions.size(); ++r) {
      if (rank_positions[r] != rank_positions[0]) {
        return Status::InvalidArgument("old rank ", r, "'s resharded stream position differs "
                                       "from rank 0's");
      }
    }
    return rank_positions[0];
  }
  const int n = static_cast<int>(rank_positions.size());
  StreamPosition first;
  for (int r = 0; r < n; ++r) {
    Result<StreamPosition> position = StreamPosition::Parse(rank_positions[r]);
    if (!position.ok()) {
      return position.status().WithContext("the stream position of old rank " +
                                           std::to_string(r));
    }
    if (position->num_shards != n || position->shard_index != r) {
      return Status::InvalidArgument("old rank ", r, "'s stream position is of shard ",
                                     position->shard_index, " of ", position->num_shards,
                                     ", not of ", r, " of ", n);
    }
    if (r == 0) first = *position;
    if (position->epoch != first.epoch || position->epoch_started != first.epoch_started ||
        position->batches_in_epoch != first.batches_in_epoch) {
      return Status::InvalidArgument(
          "old rank ", r, " stopped at batch ", position->batches_in_epoch, " of epoch ",
          position->epoch, " and rank 0 at batch ", first.batches_in_epoch, " of epoch ",
          first.epoch, ": the ranks of a job step together");
    }
  }
  return JsonText(Json(ReshardedPositions{rank_positions}));
}

ElasticStreamSource::ElasticStreamSource(StreamReader* main, StreamShardOpener open, int rank,
                                         int ranks)
    : main_(main), open_(std::move(open)), rank_(rank), ranks_(ranks) {}

ElasticStreamSource::~ElasticStreamSource() = default;

int64_t ElasticStreamSource::epoch() const {
  return old_.empty() && last_epoch_ < 0 ? main_->epoch() : last_epoch_;
}

Status ElasticStreamSource::StartMainAt(int64_t epoch) {
  StreamPosition start = main_->position();
  start.epoch = epoch;
  start.epoch_started = false;
  return main_->Seek(start);
}

Result<bool> ElasticStreamSource::Next(Batch* out) {
  if (!old_.empty()) {
    // One global batch: a batch of every old shard, in old rank order.
    global_.Clear(main_->num_dense(), main_->num_slots(), main_->num_labels());
    int ended = 0;
    for (size_t r = 0; r < old_.size(); ++r) {
      EMBER_ASSIGN_OR_RETURN(const bool more, old_[r]->Next(&part_));
      if (!more || old_[r]->epoch() != old_epoch_) {
        ++ended;
        continue;
      }
      AppendBatch(part_, &global_);
    }
    if (ended == 0) {
      const int64_t rows = global_.size;
      SliceBatch(global_, rank_ * rows / ranks_, (rank_ + 1) * rows / ranks_, out);
      resharded_records_ += out->size;
      last_epoch_ = old_epoch_;
      return true;
    }
    if (ended != static_cast<int>(old_.size())) {
      return Status::DataLoss("resuming streamed data on ", ranks_, " ranks: ", ended, " of the ",
                              old_.size(), " old shards ended epoch ", old_epoch_,
                              " before the others (the data changed since the checkpoint?)");
    }
    // The old shards' epoch is done: the next one is read by this rank's
    // own shard, as a fresh job of `ranks_` ranks reads it.
    old_.clear();
    EMBER_RETURN_IF_ERROR(StartMainAt(old_epoch_ + 1));
  }
  EMBER_ASSIGN_OR_RETURN(const bool more, main_->Next(out));
  if (more) last_epoch_ = main_->epoch();
  return more;
}

Result<std::string> ElasticStreamSource::ResumePosition() const {
  if (old_.empty()) return main_->ResumePosition();
  std::vector<std::string> positions;
  for (const auto& reader : old_) {
    EMBER_ASSIGN_OR_RETURN(std::string position, reader->ResumePosition());
    positions.push_back(std::move(position));
  }
  return ReshardedStreamPosition(positions);
}

Status ElasticStreamSource::ResumeFrom(std::string_view position) {
  bool resharded = false;
  EMBER_ASSIGN_OR_RETURN(std::vector<StreamPosition> old, ParseResharded(position, &resharded));
  old_.clear();
  last_epoch_ = -1;  // The main reader's, until a resharded position says otherwise.
  if (!resharded) return main_->ResumeFrom(position);
  const int n = static_cast<int>(old.size());
  if (n == ranks_) {
    // Back on the old number of ranks: this rank's own old shard.
    return main_->Seek(old[static_cast<size_t>(rank_)]);
  }
  if (!old[0].epoch_started) {
    // Nothing of that epoch was read: it is this rank's shard's to read.
    return StartMainAt(old[0].epoch);
  }
  std::vector<std::unique_ptr<StreamReader>> readers;
  for (int r = 0; r < n; ++r) {
    Result<std::unique_ptr<StreamReader>> reader = open_(r, n);
    if (!reader.ok()) {
      return reader.status().WithContext("opening old shard " + std::to_string(r) + " of " +
                                         std::to_string(n));
    }
    EMBER_RETURN_IF_ERROR((*reader)->Seek(old[static_cast<size_t>(r)])
                              .WithContext("old shard " + std::to_string(r) + " of " +
                                           std::to_string(n)));
    readers.push_back(*std::move(reader));
  }
  old_ = std::move(readers);
  old_epoch_ = old[0].epoch;
  last_epoch_ = old[0].last_epoch;
  return Status::OK();
}

}  // namespace ember::io
