#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/status.h"
#include "embedding/embedding_table.h"

namespace ember::embedding {

// Largest row a tier accepts. Far above any real row (a dim-2^20 row with
// Adagrad state is 8 MiB); it keeps a typo from asking for gigabyte rows.
constexpr int64_t kMaxTierRowBytes = int64_t{1} << 26;

// Returns InvalidArgument naming `row_bytes` unless it is in
// [1, kMaxTierRowBytes].
Status ValidateTierRowBytes(int64_t row_bytes);

// A store of fixed-size rows keyed by 64-bit Key: one storage level of an
// embedding table (memory in front, disk behind). Every row of a tier has
// row_bytes() bytes; what the bytes mean (weights, optimizer state) is the
// caller's business. All 2^64 keys, 0 and UINT64_MAX included, are valid.
//
// Thread safety: all methods may be called concurrently. Each Put and Delete
// is atomic: a concurrent Get or Scan sees all of its rows or none of them.
class Tier {
 public:
  virtual ~Tier() = default;

  // Bytes per row; fixed when the tier is made.
  virtual int64_t row_bytes() const = 0;

  // Copies the row of keys[i] to out + i * row_bytes() for every key the tier
  // holds. `*missing` is cleared, then receives the indices i (in increasing
  // order) of the keys the tier does not hold; their slots in `out` are left
  // as they were. A missing key is not an error. `keys` may repeat a key.
  // Reads one consistent view of the tier.
  // Returns IOError if the backing store fails and DataLoss if a stored row
  // has the wrong size; `out` and `*missing` are then unspecified.
  // REQUIRES: out has room for keys.size() * row_bytes() bytes.
  virtual Status Get(const std::vector<Key>& keys, char* out, std::vector<int64_t>* missing) = 0;

  // Stores rows (keys.size() x row_bytes() bytes, row i for keys[i]),
  // replacing rows already held. If a key repeats, its last row wins.
  // Atomic: on error no row of the call is stored.
  virtual Status Put(const std::vector<Key>& keys, const char* rows) = 0;

  // Removes the rows of `keys`; keys the tier does not hold are ignored.
  // Atomic like Put.
  virtual Status Delete(const std::vector<Key>& keys) = 0;

  // Number of rows held: exact for an in-memory tier, an estimate for a disk
  // tier (it may count overwritten or deleted rows not yet compacted away).
  virtual Result<int64_t> ApproximateCount() = 0;

  // Makes every Put and Delete that returned before the call durable: a tier
  // reopened on the same storage sees them. A no-op for in-memory tiers.
  virtual Status Flush() = 0;

  // The callback of Scan: `row` (row_bytes() bytes) is valid only during the
  // call. Returning an error stops the scan.
  using RowVisitor = std::function<Status(Key key, const char* row)>;

  // Calls visit(key, row) once for every row, in an order of the tier's
  // (NewInMemoryTier's: increasing key order; a RocksDB tier's:
  // RocksDbTierOptions::key_shards), over a
  // consistent snapshot taken when Scan starts (rows written later are not
  // seen); `visit` may call this tier's other methods. For checkpoints.
  // Returns the first error of `visit`, or IOError / DataLoss as Get does.
  virtual Status Scan(const RowVisitor& visit) = 0;
};

// A mutex-guarded hash map: the reference implementation of the Tier contract
// (it does not bound its memory). Fails with InvalidArgument if
// ValidateTierRowBytes rejects `row_bytes`.
Result<std::unique_ptr<Tier>> NewInMemoryTier(int64_t row_bytes);

}  // namespace ember::embedding
