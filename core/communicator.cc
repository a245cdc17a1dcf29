#include "core/communicator.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace ember {
namespace {

std::string Describe(ConstCommBuffer buffer) {
  return internal::StrCat(buffer.count, " ", CommDTypeName(buffer.dtype), " on ",
                          buffer.device.ToString());
}

bool Overlap(ConstCommBuffer a, CommBuffer b) {
  const char* a_begin = static_cast<const char*>(a.data);
  const char* b_begin = static_cast<const char*>(b.data);
  const size_t b_bytes = ConstCommBuffer(b).bytes();
  if (a.bytes() == 0 || b_bytes == 0) return false;
  return a_begin < b_begin + b_bytes && b_begin < a_begin + a.bytes();
}

Status ValidateBuffer(const char* op, const char* name, ConstCommBuffer buffer) {
  if (buffer.count < 0) {
    return Status::InvalidArgument(op, ": ", name, " has a negative count (", buffer.count, ")");
  }
  if (buffer.count > 0 && buffer.data == nullptr) {
    return Status::InvalidArgument(op, ": ", name, " (", Describe(buffer), ") has no data");
  }
  return Status::OK();
}

Status ValidateCounts(const char* op, const char* name, const std::vector<int64_t>& counts,
                      int size, int64_t total) {
  if (static_cast<int>(counts.size()) != size) {
    return Status::InvalidArgument(op, ": ", name, " has ", counts.size(), " entries for ", size,
                                   " ranks");
  }
  int64_t sum = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] < 0) {
      return Status::InvalidArgument(op, ": ", name, "[", p, "] is negative (", counts[p], ")");
    }
    sum += counts[p];
  }
  if (sum != total) {
    return Status::InvalidArgument(op, ": ", name, " sum to ", sum, " but the buffer holds ", total,
                                   " elements");
  }
  return Status::OK();
}

}  // namespace

size_t CommDTypeSize(CommDType dtype) {
  switch (dtype) {
    case CommDType::kF32: return 4;
    case CommDType::kF64: return 8;
    case CommDType::kF16: return 2;
    case CommDType::kBF16: return 2;
    case CommDType::kI32: return 4;
    case CommDType::kI64: return 8;
    case CommDType::kU64: return 8;
  }
  return 0;
}

const char* CommDTypeName(CommDType dtype) {
  switch (dtype) {
    case CommDType::kF32: return "f32";
    case CommDType::kF64: return "f64";
    case CommDType::kF16: return "f16";
    case CommDType::kBF16: return "bf16";
    case CommDType::kI32: return "i32";
    case CommDType::kI64: return "i64";
    case CommDType::kU64: return "u64";
  }
  return "unknown";
}

CommDType ToCommDType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CommDType::kF32;
    case DType::kF16: return CommDType::kF16;
    case DType::kBF16: return CommDType::kBF16;
    case DType::kI32: return CommDType::kI32;
    case DType::kI64: return CommDType::kI64;
  }
  LOG(FATAL) << "DType " << static_cast<int>(dtype) << " has no CommDType";
  return CommDType::kF32;
}

bool CommDTypeIsSummable(CommDType dtype) {
  return dtype != CommDType::kF16 && dtype != CommDType::kBF16;
}

Status Communicator::SendRecvGroup(const std::vector<PeerTransfer>& transfers) {
  for (const PeerTransfer& t : transfers) {
    if (t.send) EMBER_RETURN_IF_ERROR(Send(t.data, t.peer, t.tag));
  }
  for (const PeerTransfer& t : transfers) {
    if (!t.send) EMBER_RETURN_IF_ERROR(Recv(t.data, t.peer, t.tag));
  }
  return Status::OK();
}

Status Communicator::ReduceScatter(ConstCommBuffer in, CommBuffer out) {
  EMBER_RETURN_IF_ERROR(ValidateReduceScatter(size(), in, out));
  if (!in.device.is_cpu() || !out.device.is_cpu()) {
    return Status::Unimplemented("reduce_scatter: this backend reduces device buffers with ",
                                 "all_reduce only");
  }
  const size_t element_bytes = CommDTypeSize(in.dtype);
  std::vector<char> sum(in.bytes());
  CommBuffer scratch = out;
  scratch.data = sum.data();
  scratch.count = in.count;
  EMBER_RETURN_IF_ERROR(AllReduce(in, scratch));
  if (out.count > 0) {
    std::memcpy(out.data, sum.data() + static_cast<size_t>(rank()) * out.count * element_bytes,
                static_cast<size_t>(out.count) * element_bytes);
  }
  return Status::OK();
}

Status ValidateCommunicatorOptions(const CommunicatorOptions& options) {
  if (!(options.timeout_seconds > 0) || !std::isfinite(options.timeout_seconds)) {
    return Status::InvalidArgument("communicator timeout_seconds must be positive and finite, got ",
                                   options.timeout_seconds);
  }
  return Status::OK();
}

Status ValidatePeer(const Communicator& comm, const char* op, int peer, int tag) {
  if (peer < 0 || peer >= comm.size() || peer == comm.rank()) {
    return Status::InvalidArgument(op, ": rank ", comm.rank(), " cannot address rank ", peer,
                                   " in a group of ", comm.size(), " (peers are 0..",
                                   comm.size() - 1, " other than itself)");
  }
  if (tag < 0) return Status::InvalidArgument(op, ": tag ", tag, " is negative");
  return Status::OK();
}

Status ValidateAllReduce(ConstCommBuffer in, CommBuffer out) {
  EMBER_RETURN_IF_ERROR(ValidateBuffer("all_reduce", "in", in));
  EMBER_RETURN_IF_ERROR(ValidateBuffer("all_reduce", "out", out));
  if (in.dtype != out.dtype || in.count != out.count) {
    return Status::InvalidArgument("all_reduce: in (", Describe(in), ") and out (", Describe(out),
                                   ") differ in dtype or count");
  }
  if (!CommDTypeIsSummable(in.dtype)) {
    return Status::InvalidArgument("all_reduce: cannot sum ", CommDTypeName(in.dtype),
                                   " (sum in f32 and convert)");
  }
  if (in.data != out.data && Overlap(in, out)) {
    return Status::InvalidArgument("all_reduce: in and out overlap without being the same buffer");
  }
  return Status::OK();
}

Status ValidateReduceScatter(int size, ConstCommBuffer in, CommBuffer out) {
  EMBER_RETURN_IF_ERROR(ValidateBuffer("reduce_scatter", "in", in));
  EMBER_RETURN_IF_ERROR(ValidateBuffer("reduce_scatter", "out", out));
  if (in.dtype != out.dtype || in.count != out.count * size) {
    return Status::InvalidArgument("reduce_scatter: in (", Describe(in), ") must hold ", size,
                                   " x out (", Describe(out), ")");
  }
  if (!CommDTypeIsSummable(in.dtype)) {
    return Status::InvalidArgument("reduce_scatter: cannot sum ", CommDTypeName(in.dtype),
                                   " (sum in f32 and convert)");
  }
  if (Overlap(in, out)) return Status::InvalidArgument("reduce_scatter: in and out overlap");
  return Status::OK();
}

Status ValidateAllGather(int size, ConstCommBuffer in, CommBuffer out) {
  EMBER_RETURN_IF_ERROR(ValidateBuffer("all_gather", "in", in));
  EMBER_RETURN_IF_ERROR(ValidateBuffer("all_gather", "out", out));
  if (in.dtype != out.dtype || out.count != in.count * size) {
    return Status::InvalidArgument("all_gather: out (", Describe(out), ") must hold ", size,
                                   " x in (", Describe(in), ")");
  }
  if (Overlap(in, out)) return Status::InvalidArgument("all_gather: in and out overlap");
  return Status::OK();
}

Status ValidateAllToAllV(int size, ConstCommBuffer in, const std::vector<int64_t>& send_counts,
                         CommBuffer out, const std::vector<int64_t>& recv_counts) {
  EMBER_RETURN_IF_ERROR(ValidateBuffer("all_to_all_v", "in", in));
  EMBER_RETURN_IF_ERROR(ValidateBuffer("all_to_all_v", "out", out));
  if (in.dtype != out.dtype) {
    return Status::InvalidArgument("all_to_all_v: in (", Describe(in), ") and out (", Describe(out),
                                   ") differ in dtype");
  }
  EMBER_RETURN_IF_ERROR(ValidateCounts("all_to_all_v", "send_counts", send_counts, size, in.count));
  EMBER_RETURN_IF_ERROR(
      ValidateCounts("all_to_all_v", "recv_counts", recv_counts, size, out.count));
  if (Overlap(in, out)) return Status::InvalidArgument("all_to_all_v: in and out overlap");
  return Status::OK();
}

Status ValidateBroadcast(int size, CommBuffer data, int root) {
  EMBER_RETURN_IF_ERROR(ValidateBuffer("broadcast", "data", data));
  if (root < 0 || root >= size) {
    return Status::InvalidArgument("broadcast: root ", root, " is not a rank of a group of ", size);
  }
  return Status::OK();
}

Result<std::vector<int64_t>> ExchangeCounts(Communicator& comm,
                                            const std::vector<int64_t>& send_counts) {
  const int size = comm.size();
  if (static_cast<int>(send_counts.size()) != size) {
    return Status::InvalidArgument("exchange_counts: send_counts has ", send_counts.size(),
                                   " entries for ", size, " ranks");
  }
  std::vector<int64_t> recv_counts(size);
  const std::vector<int64_t> ones(size, 1);
  EMBER_RETURN_IF_ERROR(comm.AllToAllV(send_counts, ones, recv_counts, ones));
  for (int q = 0; q < size; ++q) {
    if (recv_counts[q] < 0) {
      return Status::InvalidArgument("exchange_counts: rank ", q, " announced a negative count (",
                                     recv_counts[q], ") for rank ", comm.rank());
    }
  }
  return recv_counts;
}

}  // namespace ember
