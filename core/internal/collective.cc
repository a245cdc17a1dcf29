#include "core/internal/collective.h"

#include <glog/logging.h>

#include <cstring>
#include <type_traits>

namespace ember::internal {
namespace {

// The type sums are computed in: T, or for integers its unsigned twin, whose
// additions wrap where signed overflow would be undefined.
template <typename T, bool = std::is_integral_v<T>>
struct SumType {
  using type = T;
};
template <typename T>
struct SumType<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
void SumInRankOrder(const std::vector<const char*>& parts, int64_t count, void* out) {
  using Acc = typename SumType<T>::type;
  Acc* sum = static_cast<Acc*>(out);
  std::memcpy(sum, parts[0], static_cast<size_t>(count) * sizeof(T));
  for (size_t r = 1; r < parts.size(); ++r) {
    const Acc* in = reinterpret_cast<const Acc*>(parts[r]);
    for (int64_t i = 0; i < count; ++i) sum[i] += in[i];
  }
}

}  // namespace

const char* OpName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kAllToAllV: return "all_to_all_v";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kSend: return "send";
  }
  return "unknown";
}

std::string Signature::ToString() const {
  std::string text = OpName(kind);
  if (kind == OpKind::kBarrier) return text;
  text += count >= 0 ? StrCat(" of ", count, " ") : std::string(" of ");
  text += CommDTypeName(dtype);
  if (root >= 0) text += StrCat(" from root ", root);
  return text;
}

std::string ArgumentProblem(OpKind kind, const Status& invalid) {
  std::string problem = invalid.message();
  const std::string op = std::string(OpName(kind)) + ": ";
  if (problem.rfind(op, 0) == 0) problem.erase(0, op.size());
  return problem;
}

void SumInRankOrder(const std::vector<const char*>& parts, CommBuffer out) {
  if (out.count == 0) return;
  switch (out.dtype) {
    case CommDType::kF32: return SumInRankOrder<float>(parts, out.count, out.data);
    case CommDType::kF64: return SumInRankOrder<double>(parts, out.count, out.data);
    case CommDType::kI32: return SumInRankOrder<int32_t>(parts, out.count, out.data);
    case CommDType::kI64: return SumInRankOrder<int64_t>(parts, out.count, out.data);
    case CommDType::kU64: return SumInRankOrder<uint64_t>(parts, out.count, out.data);
    case CommDType::kF16:
    case CommDType::kBF16: break;
  }
  LOG(FATAL) << "ValidateAllReduce admits only summable dtypes, got " << CommDTypeName(out.dtype);
}

}  // namespace ember::internal
