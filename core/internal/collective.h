#pragma once

// What the host communicators (core/in_process_communicator.cc,
// core/mpi_communicator.cc) share about a collective: its kind and name, the
// signature every rank must agree on, the text of a rank's argument error,
// and AllReduce's rank-ordered sum. Internal to core/.

#include <cstdint>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"

namespace ember::internal {

// kSend only travels on the MPI wire (core/internal/mpi_wire.h).
enum class OpKind : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAllV,
  kBroadcast,
  kBarrier,
  kSend,  // Last: the wire checks kinds against it.
};

// "all_reduce", "send", ...
const char* OpName(OpKind kind);

// What every rank of one collective must agree on; count is -1 where ranks
// may differ (AllToAllV), root -1 where there is none.
struct Signature {
  OpKind kind = OpKind::kBarrier;
  CommDType dtype = CommDType::kF32;
  int64_t count = -1;
  int root = -1;

  bool operator==(const Signature& other) const {
    return kind == other.kind && dtype == other.dtype && count == other.count && root == other.root;
  }
  // "all_reduce of 12 f32", "broadcast of 4 u64 from root 0", "barrier".
  std::string ToString() const;
};

// The message of `invalid`, an argument check of a collective of `kind`,
// without the "all_reduce: " the checks (core/communicator.h) lead with: the
// caller names the collective with its number instead.
std::string ArgumentProblem(OpKind kind, const Status& invalid);

// out = parts[0] + parts[1] + ..., added in rank order, each part holding
// out.count elements of out.dtype; integers wrap. The order fixes the bits
// of a floating-point sum: every backend gives the same.
// REQUIRES: parts is not empty; no part overlaps `out`; out.dtype is one
// that ValidateAllReduce admits.
void SumInRankOrder(const std::vector<const char*>& parts, CommBuffer out);

}  // namespace ember::internal
