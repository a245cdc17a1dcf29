// Prefetch of internal::CachedTable: background loaders that read the rows
// of upcoming batches from the tier behind into the row cache, sharing each
// batch's shards, and pin them there until their Pull. See
// embedding/tiered_table.h for the design.

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "core/mutex.h"
#include "core/random.h"
#include "core/status.h"
#include "embedding/internal/cached_table.h"

namespace ember::embedding::internal {
namespace {

// Key batches Prefetch may queue before it blocks: enough to run a few
// batches ahead of the Pulls, few enough to bound the keys held.
constexpr size_t kPrefetchQueueDepth = 4;

// A loader's reads of a shard (see ChangeLog): Start() begins them, under the
// shard's lock; Done() ends them, under it, or else leaving the scope does
// (an exception).
class ShardReader {
 public:
  explicit ShardReader(Shard& shard) : shard_(shard) {}
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;
  ~ShardReader() {
    if (!reading_) return;
    MutexLock lock(shard_.mu);
    Done();
  }

  // May throw std::bad_alloc (then nothing has begun).
  ChangeLog& Start() REQUIRES(shard_.mu) {
    std::unique_ptr<ChangeLog>& log = shard_.next.reading;
    if (log == nullptr) log = std::make_unique<ChangeLog>();
    ++log->readers;
    reading_ = true;
    return *log;
  }

  void Done() REQUIRES(shard_.mu) {
    if (!reading_) return;
    reading_ = false;
    if (--shard_.next.reading->readers == 0) shard_.next.reading.reset();
  }

 private:
  Shard& shard_;
  bool reading_ = false;
};

}  // namespace

void CachedTable::Prefetch(const std::vector<Key>& keys) {
  // Without a tier behind there is nothing to load.
  if (keys.empty() || disk_ == nullptr) return;
  std::shared_ptr<PrefetchRequest> request;
  try {
    request = std::make_shared<PrefetchRequest>();
    request->keys = keys;
  } catch (const std::bad_alloc&) {
    return;  // a hint: skipping it changes no result
  }
  request->loaders_left.store(static_cast<int>(loaders_.size()), std::memory_order_relaxed);
  // The Pull these keys are for comes at most a queue's depth of Prefetches
  // later (Prefetch blocks beyond that), and the step normally advances once
  // per Pull; the margin covers a caller that sets the step just before or
  // after its Prefetch.
  request->step = step();
  request->pin_until_step = request->step + static_cast<int64_t>(kPrefetchQueueDepth) + 1;
  uint64_t fingerprint = keys.size();
  for (Key key : keys) fingerprint += FingerprintTerm(Mix64(key));
  request->fingerprint = fingerprint;
  MutexLock lock(prefetch_mu_);
  prefetch_cv_.Wait(prefetch_mu_, [&] {
    if (prefetch_closed_) return true;
    for (const auto& loader : loaders_) {
      if (loader->queue.size() >= kPrefetchQueueDepth) return false;
    }
    return true;
  });
  if (prefetch_closed_) return;
  for (auto& loader : loaders_) loader->queue.push_back(request);
  // A loader holds at most one request beside its queue's.
  recent_requests_.push_back(request);
  if (recent_requests_.size() > kPrefetchQueueDepth + 1) recent_requests_.pop_front();
  prefetch_cv_.NotifyAll();
}

void CachedTable::MarkPulled(const BatchScratch& batch) {
  {
    MutexLock lock(prefetch_mu_);
    if (recent_requests_.empty()) return;  // a table never asked to prefetch
  }
  const size_t n = static_cast<size_t>(batch.begin[cache_.num_shards()]);
  uint64_t fingerprint = n;
  for (size_t i = 0; i < n; ++i) fingerprint += FingerprintTerm(batch.hashes[i]);
  MutexLock lock(prefetch_mu_);
  for (const auto& request : recent_requests_) {
    if (request->fingerprint == fingerprint && request->keys.size() == n) {
      request->pulled.store(true, std::memory_order_relaxed);
    }
  }
}

void CachedTable::WaitForPrefetch() {
  MutexLock lock(prefetch_mu_);
  prefetch_cv_.Wait(prefetch_mu_, [&] {
    for (const auto& loader : loaders_) {
      if (!loader->queue.empty() || loader->busy) return false;
    }
    return true;
  });
}

void CachedTable::PrefetchLoop(int index) {
  PrefetchLoader& loader = *loaders_[index];
  while (true) {
    std::shared_ptr<PrefetchRequest> request;
    {
      MutexLock lock(prefetch_mu_);
      prefetch_cv_.Wait(prefetch_mu_, [&] { return prefetch_closed_ || !loader.queue.empty(); });
      if (prefetch_closed_) return;
      request = std::move(loader.queue.front());
      loader.queue.pop_front();
      loader.busy = true;
      // Prefetch may be waiting for room.
      prefetch_cv_.NotifyAll();
    }
    PrefetchBatch(*request);
    request.reset();
    MutexLock lock(prefetch_mu_);
    loader.busy = false;
    prefetch_cv_.NotifyAll();
  }
}

void CachedTable::PrefetchBatch(PrefetchRequest& request) {
  BatchScratchPool& batches = cache_.batches();
  const int num_shards = cache_.num_shards();
  Status first;
  // Unless its Pull came first: the loaders are behind, and the Pull reads
  // the rows.
  if (!request.pulled.load(std::memory_order_relaxed)) {
    try {
      // The keys grouped by shard like a Pull's, once for all loaders (the
      // others wait for the first; a throw leaves the grouping to the next).
      std::call_once(request.grouped, [&] {
        std::unique_ptr<BatchScratch> batch = batches.Take();
        batches.Group(request.keys, *batch);
        request.batch = std::move(batch);
      });
      BatchScratch& batch = *request.batch;
      // Shard by shard on this thread, taking the next shard no loader has
      // taken: Pulls in the caller's arena keep their threads, no two
      // loaders read the same shard of a request, none idles while shards
      // are left, and a shard's lock is not held while its rows are read
      // from disk.
      for (int s = request.next_shard.fetch_add(1, std::memory_order_relaxed);
           s < num_shards && first.ok();
           s = request.next_shard.fetch_add(1, std::memory_order_relaxed)) {
        if (batch.begin[s] == batch.begin[s + 1]) continue;
        first = PrefetchShard(cache_.shard(s), s, request, batch);
      }
    } catch (const std::bad_alloc&) {
      first = Status::ResourceExhausted("embedding table: out of memory prefetching rows");
    }
  }
  // The last loader out returns the grouping (acq_rel: after every other
  // loader's use of it).
  if (request.loaders_left.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
      request.batch != nullptr) {
    batches.Return(std::move(request.batch));
  }
  if (first.ok()) return;
  LOG_EVERY_N(WARNING, 100) << "embedding prefetch failed: " << first;
  MutexLock lock(prefetch_mu_);
  if (prefetch_error_.ok()) prefetch_error_ = std::move(first);
  // Release: pairs with the acquire in TakePrefetchError.
  has_prefetch_error_.store(true, std::memory_order_release);
}

Status CachedTable::PrefetchShard(Shard& shard, int s, const PrefetchRequest& request,
                                  BatchScratch& batch) const {
  ShardIo& io = batch.io[s];
  // The batch indices of the keys to read, all of them first: io.keys then
  // holds one chunk.
  std::vector<int64_t>& wanted = io.positions;
  wanted.clear();
  size_t next = 0;
  // The next chunk of at most kIoChunkRows wanted keys that memory still
  // lacks into io.keys: none once the request's Pull has begun (the loader is
  // behind; the Pull reads them), and none that a Pull or Push loaded or
  // created meanwhile. REQUIRES shard.mu.
  auto take_chunk = [&] {
    io.keys.clear();
    if (request.pulled.load(std::memory_order_relaxed)) return;
    for (; next < wanted.size() && static_cast<int64_t>(io.keys.size()) < kIoChunkRows; ++next) {
      const int64_t k = wanted[next];
      if (shard.index.Find(batch.keys[k], batch.hashes[k]) < 0) io.keys.push_back(batch.keys[k]);
    }
  };
  ShardReader reader(shard);
  // The log of the keys changed on disk while this loader reads, and where
  // its current read begins in it.
  ChangeLog* log = nullptr;
  size_t mark = 0;
  {
    MutexLock lock(shard.mu);
    // The Pull marks its request before it takes a shard's lock: unless
    // marked now, it has not resolved this shard's rows yet.
    if (request.pulled.load(std::memory_order_relaxed)) return Status::OK();
    // Rows already in memory are pinned too: they must still be there when
    // the Pull comes.
    cache_.budget().Pin(shard, s, request.pin_until_step, cache_.step(), batch);
    // Only rows the disk may hold are read: new keys are the Pull's.
    for (int64_t k = batch.begin[s]; k < batch.begin[s + 1]; ++k) {
      if (shard.index.Find(batch.keys[k], batch.hashes[k]) < 0 && MayBeOnDisk(batch.hashes[k])) {
        wanted.push_back(k);
      }
    }
    take_chunk();
    if (io.keys.empty()) return Status::OK();
    log = &reader.Start();
    mark = log->keys.size();
  }
  const int64_t row_bytes = sizeof(float) * cache_.row_floats();
  const int64_t meta_offset = cache_.meta_offset();
  // The keys written or deleted on disk during one chunk's read, sorted.
  std::vector<Key> changed;
  // In chunks, each read without the lock and inserted under it, so that the
  // row buffer (and RocksDB's buffer of the blocks one MultiGet reads) stays
  // small whatever the batch.
  while (true) {
    Status read_status = ReadDiskRows(/*shard=*/nullptr, io);
    MutexLock lock(shard.mu);
    if (!read_status.ok()) {
      reader.Done();
      return read_status;
    }
    int64_t read = 0;
    for (int64_t slot : io.slots) read += slot >= 0;
    shard.next.disk_reads += read;
    // A write or delete of a key since its read may have replaced the row
    // read (a row loaded, updated and written back again): such rows are
    // not inserted (a Pull reads them); when the keys could not all be
    // noted, none is.
    if (log->lost) {
      reader.Done();
      return Status::OK();
    }
    changed.assign(log->keys.begin() + mark, log->keys.end());
    std::sort(changed.begin(), changed.end());
    int64_t inserted = 0;
    for (size_t i = 0; i < io.keys.size(); ++i) {
      if (io.slots[i] < 0) continue;  // absent or expired: the Pull decides
      const Key key = io.keys[i];
      const uint64_t hash = Mix64(key);
      // A Pull or Push loaded or created it meanwhile: memory's row is newer.
      if (shard.index.Find(key, hash) >= 0) continue;
      if (!changed.empty() && std::binary_search(changed.begin(), changed.end(), key)) continue;
      const char* row = io.rows.data() + i * row_bytes;
      // TTL may have run since the read.
      alignas(float) float meta[kMetaFloats];
      std::memcpy(meta, row + meta_offset * sizeof(float), sizeof(meta));
      if (ExpiredOnDisk(meta)) continue;
      // Pulled after the Prefetch and evicted since: the loaders are behind
      // and the Pull this row was for has most likely come and gone. Loading
      // it would only push out a row that a coming Pull needs.
      if (ReadMeta(meta).last_seen_step > request.step) continue;
      // InsertRow copies with memcpy, so the byte buffer needs no alignment.
      cache_.InsertRow(shard, key, hash, reinterpret_cast<const float*>(row));
      ++inserted;
    }
    shard.next.prefetched += inserted;
    shard.next.disk_rows -= inserted;
    Status written = WriteBack(shard, io);
    // This loader's own write-back, under the lock, changed nothing the
    // next chunk reads (that read comes after it).
    mark = log->keys.size();
    if (written.ok()) take_chunk();
    if (!written.ok() || io.keys.empty()) {
      reader.Done();
      return written;
    }
  }
}

}  // namespace ember::embedding::internal
