#include "embedding/sharded_table.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "core/random.h"
#include "embedding/unique_keys.h"

namespace ember::embedding {
namespace {

// Salt of the owner hash: keeps it independent of the hashes the local
// tables shard and sketch with.
constexpr uint64_t kOwnerSalt = 0x5ba5ed7ab1e5eedULL;

// One direction of an exchange: the caller's keys grouped by owner.
struct Buckets {
  std::vector<Key> keys;         // Grouped by owner, the caller's order within a group.
  std::vector<int64_t> from;     // keys[i] is the caller's keys[from[i]].
  std::vector<int64_t> counts;   // Keys per owner.
};

void GroupByOwner(const std::vector<Key>& keys, int ranks, Buckets* out) {
  out->counts.assign(static_cast<size_t>(ranks), 0);
  std::vector<int> owner(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    owner[i] = KeyOwner(keys[i], ranks);
    ++out->counts[static_cast<size_t>(owner[i])];
  }
  std::vector<int64_t> next(static_cast<size_t>(ranks), 0);
  for (int r = 1; r < ranks; ++r) next[r] = next[r - 1] + out->counts[r - 1];
  out->keys.resize(keys.size());
  out->from.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t at = next[static_cast<size_t>(owner[i])]++;
    out->keys[static_cast<size_t>(at)] = keys[i];
    out->from[static_cast<size_t>(at)] = static_cast<int64_t>(i);
  }
}

std::vector<int64_t> Scaled(const std::vector<int64_t>& counts, int64_t factor) {
  std::vector<int64_t> scaled(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) scaled[i] = counts[i] * factor;
  return scaled;
}

class ShardedTable final : public EmbeddingTable {
 public:
  ShardedTable(std::unique_ptr<EmbeddingTable> local, const ShardedTableComms& comms)
      : local_(std::move(local)), comms_(comms), dim_(local_->dim()) {}

  Status Pull(const std::vector<Key>& keys, float* out) override {
    if (out == nullptr && !keys.empty()) return Status::InvalidArgument("Pull: null output");
    return Serve(*comms_.pull, keys, out, /*lookup=*/false).WithContext("sharded pull");
  }

  Status Lookup(const std::vector<Key>& keys, float* out) override {
    if (out == nullptr && !keys.empty()) return Status::InvalidArgument("Lookup: null output");
    return Serve(*comms_.lookup, keys, out, /*lookup=*/true).WithContext("sharded lookup");
  }

  Status Push(const std::vector<Key>& keys, const float* grads) override {
    if (grads == nullptr && !keys.empty()) return Status::InvalidArgument("Push: null gradients");
    return PushToOwners(keys, grads).WithContext("sharded push");
  }

  void set_step(int64_t step) override { local_->set_step(step); }
  int64_t step() const override { return local_->step(); }
  int64_t EvictExpired() override { return local_->EvictExpired(); }
  int dim() const override { return dim_; }
  int64_t num_rows() const override { return local_->num_rows(); }
  int64_t memory_bytes() const override { return local_->memory_bytes(); }
  TableStats stats() const override {
    TableStats stats = local_->stats();
    stats.exchanged_bytes = sent_.load(std::memory_order_relaxed);
    stats.exchanged_bytes_minimum = minimum_.load(std::memory_order_relaxed);
    return stats;
  }

  void Prefetch(const std::vector<Key>& keys) override {
    // Only this rank's rows: the others' owners are not asked (a hint).
    std::vector<Key> own;
    const int ranks = comms_.pull->size(), rank = comms_.pull->rank();
    for (Key key : keys) {
      if (KeyOwner(key, ranks) == rank) own.push_back(key);
    }
    if (!own.empty()) local_->Prefetch(own);
  }

  // The owner-side Pull runs on keys gathered from every rank, not on this
  // array: there is nothing to prepare ahead.
  void PrepareKeys(const std::vector<Key>&) override {}

  Status Reserve(int64_t rows) override {
    if (rows < 0) return Status::InvalidArgument("Reserve: rows must be >= 0, got ", rows);
    const int ranks = comms_.pull->size();
    return local_->Reserve((rows + ranks - 1) / ranks);
  }

  StoredRows& stored_rows() override { return local_->stored_rows(); }

 private:
  // Pull (or Lookup): keys to their owners, the owners' rows back.
  Status Serve(Communicator& comm, const std::vector<Key>& keys, float* out, bool lookup) {
    Buckets sent;
    GroupByOwner(keys, comm.size(), &sent);
    std::vector<Key> asked;  // Keys other ranks (and this one) ask of this owner, by rank.
    std::vector<int64_t> asked_counts;
    EMBER_RETURN_IF_ERROR(
        AllToAllVUnknownCounts(comm, sent.keys, sent.counts, &asked, &asked_counts));
    // A key several ranks ask for is read once (a Pull counts it once, as
    // one rank pulling the union would).
    std::vector<Key> distinct;
    std::vector<int64_t> position;
    UniqueKeys(asked, &distinct, &position);
    std::vector<float> rows(distinct.size() * static_cast<size_t>(dim_));
    Status read = lookup ? local_->Lookup(distinct, rows.data())
                         : local_->Pull(distinct, rows.data());
    if (!read.ok()) {
      // The peers wait for these rows: tell them at once.
      comm.Abort(read);
      return read;
    }
    std::vector<float> reply(asked.size() * static_cast<size_t>(dim_));
    for (size_t i = 0; i < asked.size(); ++i) {
      std::memcpy(&reply[i * dim_], &rows[static_cast<size_t>(position[i]) * dim_],
                  sizeof(float) * dim_);
    }
    std::vector<float> got(sent.keys.size() * static_cast<size_t>(dim_));
    EMBER_RETURN_IF_ERROR(
        comm.AllToAllV(reply, Scaled(asked_counts, dim_), got, Scaled(sent.counts, dim_)));
    // Keys out and rows back, to and from the other ranks only.
    const int64_t remote_keys = Remote(sent.counts, comm), served = Remote(asked_counts, comm);
    Count(remote_keys * 8 + served * 4 * dim_ + 8 * (comm.size() - 1),
          remote_keys * 8 + served * 4 * dim_);
    for (size_t i = 0; i < sent.keys.size(); ++i) {
      std::memcpy(out + static_cast<size_t>(sent.from[i]) * dim_, &got[i * dim_],
                  sizeof(float) * dim_);
    }
    return Status::OK();
  }

  // Push: keys and gradients to their owners; each owner sums a key's
  // gradients in rank order and pushes the sum once.
  Status PushToOwners(const std::vector<Key>& keys, const float* grads) {
    Communicator& comm = *comms_.push;
    Buckets sent;
    GroupByOwner(keys, comm.size(), &sent);
    std::vector<float> sent_grads(sent.keys.size() * static_cast<size_t>(dim_));
    for (size_t i = 0; i < sent.keys.size(); ++i) {
      std::memcpy(&sent_grads[i * dim_], grads + static_cast<size_t>(sent.from[i]) * dim_,
                  sizeof(float) * dim_);
    }
    std::vector<Key> got;
    std::vector<int64_t> got_counts;
    EMBER_RETURN_IF_ERROR(AllToAllVUnknownCounts(comm, sent.keys, sent.counts, &got, &got_counts));
    std::vector<float> got_grads(got.size() * static_cast<size_t>(dim_));
    EMBER_RETURN_IF_ERROR(comm.AllToAllV(sent_grads, Scaled(sent.counts, dim_), got_grads,
                                         Scaled(got_counts, dim_)));
    // Keys and gradients out: the keys again (the owner does not keep the
    // pull's), which the minimum leaves out.
    const int64_t remote_keys = Remote(sent.counts, comm);
    Count(remote_keys * (8 + 4 * dim_) + 8 * (comm.size() - 1), remote_keys * 4 * dim_);
    // `got` is in rank order and each rank's keys are distinct, so adding
    // in arrival order sums every key's contributions in rank order.
    std::vector<Key> distinct;
    std::vector<int64_t> position;
    UniqueKeys(got, &distinct, &position);
    std::vector<float> sums(distinct.size() * static_cast<size_t>(dim_));
    int64_t first_seen = 0;  // Keys are numbered in order of first appearance.
    for (size_t i = 0; i < got.size(); ++i) {
      float* sum = &sums[static_cast<size_t>(position[i]) * dim_];
      const float* g = &got_grads[i * dim_];
      if (position[i] == first_seen) {
        ++first_seen;
        std::memcpy(sum, g, sizeof(float) * dim_);
      } else {
        for (int d = 0; d < dim_; ++d) sum[d] += g[d];
      }
    }
    // Nothing waits on this push's outcome inside the collective; the next
    // collective's peers learn of a failure from the caller's Abort.
    return local_->Push(distinct, sums.data());
  }

  // Entries of `counts` for the other ranks, summed.
  static int64_t Remote(const std::vector<int64_t>& counts, const Communicator& comm) {
    int64_t total = 0;
    for (int r = 0; r < comm.size(); ++r) {
      if (r != comm.rank()) total += counts[static_cast<size_t>(r)];
    }
    return total;
  }
  void Count(int64_t sent, int64_t minimum) {
    sent_.fetch_add(sent, std::memory_order_relaxed);
    minimum_.fetch_add(minimum, std::memory_order_relaxed);
  }

  std::unique_ptr<EmbeddingTable> local_;
  ShardedTableComms comms_;
  int dim_;
  std::atomic<int64_t> sent_{0}, minimum_{0};
};

}  // namespace

int KeyOwner(Key key, int ranks) {
  return static_cast<int>(HashCombine(key, kOwnerSalt) % static_cast<uint64_t>(ranks));
}

Result<std::unique_ptr<EmbeddingTable>> NewShardedTable(std::unique_ptr<EmbeddingTable> local,
                                                        const ShardedTableComms& comms) {
  if (local == nullptr) return Status::InvalidArgument("sharded table: no local table");
  const Communicator* all[] = {comms.pull, comms.push, comms.lookup};
  const char* names[] = {"pull", "push", "lookup"};
  for (int i = 0; i < 3; ++i) {
    if (all[i] == nullptr) {
      return Status::InvalidArgument("sharded table: no ", names[i], " communicator");
    }
    if (all[i]->rank() != comms.pull->rank() || all[i]->size() != comms.pull->size()) {
      return Status::InvalidArgument("sharded table: the ", names[i], " communicator is rank ",
                                     all[i]->rank(), " of ", all[i]->size(),
                                     ", the pull communicator rank ", comms.pull->rank(), " of ",
                                     comms.pull->size());
    }
  }
  return std::unique_ptr<EmbeddingTable>(new ShardedTable(std::move(local), comms));
}

}  // namespace ember::embedding
