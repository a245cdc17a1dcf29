// Cached oneDNN matmul primitives with user scratchpads: Bf16Gemm and
// F32LinearForward (ops/internal/matmul.h).
//
// A primitive is built for one shape, transposition, operand type, epilogue
// and OpenMP thread count (oneDNN splits the work by the thread count it sees
// when the primitive is created; the row shards of ops/graph_executor.cc run
// with 1, whole batches with the arena's). Building one takes from tens of
// microseconds to a JIT of milliseconds, so each is built once and kept for
// the process: a model has a few shapes per layer (the batch, the last partial
// batch, the row shards'). The scratchpad is the caller's
// (scratchpad_mode::user), from the caching host allocator, so two threads
// may run the same primitive at once. The cache is bounded
// (kMaxCachedMatmuls, ~70 KiB each): a job whose batch sizes keep changing
// builds the primitives of the shapes past the bound on every call instead
// of holding them all.

#include "ops/internal/matmul.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/allocator.h"
#include "core/tensor.h"
#include "core/threads.h"

namespace ember::ops::internal {
namespace {

struct CachedGemm {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, bias, scratchpad;
  size_t scratchpad_bytes = 0;
};

// What a primitive computes: c = epilogue(a * b) with operands of `type`.
struct GemmKey {
  dnnl::memory::data_type type;
  char transa, transb;
  int64_t m, n, k, lda, ldb, ldc;
  bool bias;  // + bias[n], f32
  bool relu;  // then max(., 0)
  int threads;

  auto Tie() const {
    return std::tie(type, transa, transb, m, n, k, lda, ldb, ldc, bias, relu, threads);
  }
  bool operator<(const GemmKey& other) const { return Tie() < other.Tie(); }
};

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// The stored operand [rows, cols] of a product, or its transpose.
dnnl::memory::desc OperandDesc(char trans, int64_t rows, int64_t cols, int64_t ld,
                               dnnl::memory::data_type type) {
  // A logical [rows, cols] matrix stored row-major with leading dimension ld,
  // or ('T') stored as its [cols, rows] transpose.
  const dnnl::memory::dims strides =
      trans == 'T' ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc({rows, cols}, type, strides);
}

std::mutex& CacheMutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

std::map<GemmKey, std::shared_ptr<const CachedGemm>>& Cache() {
  static auto* cache = new std::map<GemmKey, std::shared_ptr<const CachedGemm>>();
  return *cache;
}

// The cached primitive for `key`, built on first use; past kMaxCachedMatmuls
// primitives a new one is built for the call and not kept. oneDNN reports
// failures by throwing dnnl::error.
std::shared_ptr<const CachedGemm> GemmFor(const GemmKey& key) {
  {
    std::lock_guard<std::mutex> lock(CacheMutex());
    auto it = Cache().find(key);
    if (it != Cache().end()) return it->second;
  }
  auto gemm = std::make_shared<CachedGemm>();
  using dt = dnnl::memory::data_type;
  gemm->a = OperandDesc(key.transa, key.m, key.k, key.lda, key.type);
  gemm->b = OperandDesc(key.transb, key.k, key.n, key.ldb, key.type);
  gemm->c = dnnl::memory::desc({key.m, key.n}, dt::f32, dnnl::memory::dims{key.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.relu) {
    dnnl::post_ops post_ops;
    post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(post_ops);
  }
  if (key.bias) gemm->bias = dnnl::memory::desc({1, key.n}, dt::f32, dnnl::memory::dims{key.n, 1});
  const dnnl::matmul::desc desc = key.bias
                                      ? dnnl::matmul::desc(gemm->a, gemm->b, gemm->bias, gemm->c)
                                      : dnnl::matmul::desc(gemm->a, gemm->b, gemm->c);
  const dnnl::matmul::primitive_desc pd(desc, attr, CpuEngine());
  gemm->scratchpad = pd.scratchpad_desc();
  gemm->scratchpad_bytes = gemm->scratchpad.get_size();
  gemm->primitive = dnnl::matmul(pd);
  std::lock_guard<std::mutex> lock(CacheMutex());
  if (static_cast<int64_t>(Cache().size()) >= kMaxCachedMatmuls) return gemm;
  // Another thread may have built the same one meanwhile; either serves.
  return Cache().emplace(key, std::move(gemm)).first->second;
}

// Runs the primitive of `key` on the operands (bias null unless key.bias).
// oneDNN reports failures by throwing dnnl::error.
Status Run(const GemmKey& key, const void* a, const void* b, const float* bias, float* c) {
  const std::shared_ptr<const CachedGemm> gemm = GemmFor(key);
  Tensor scratchpad;
  if (gemm->scratchpad_bytes > 0) {
    EMBER_ASSIGN_OR_RETURN(
        scratchpad, Tensor::Allocate({static_cast<int64_t>((gemm->scratchpad_bytes + 3) / 4)},
                                     DType::kF32, Device::Cpu(), CpuAllocator()));
  }
  const dnnl::engine& engine = CpuEngine();
  thread_local dnnl::stream stream(engine);
  dnnl::memory a_memory(gemm->a, engine, const_cast<void*>(a));
  dnnl::memory b_memory(gemm->b, engine, const_cast<void*>(b));
  dnnl::memory c_memory(gemm->c, engine, c);
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, a_memory}, {DNNL_ARG_WEIGHTS, b_memory}, {DNNL_ARG_DST, c_memory}};
  if (key.bias) {
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(gemm->bias, engine, const_cast<float*>(bias)));
  }
  if (gemm->scratchpad_bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(gemm->scratchpad, engine, scratchpad.data<float>()));
  }
  gemm->primitive.execute(stream, args);
  stream.wait();
  return Status::OK();
}

}  // namespace

bool CpuHasBf16() {
  static const bool has = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return has;
}

Status Bf16Gemm(const char* op, char transa, char transb, int64_t m, int64_t n, int64_t k,
                const BFloat16* a, int64_t lda, const BFloat16* b, int64_t ldb, float* c,
                int64_t ldc) {
  if (!CpuHasBf16()) {
    return Status::FailedPrecondition(op, ": ", kNoBf16Products);
  }
  try {
    return Run(GemmKey{dnnl::memory::data_type::bf16, transa, transb, m, n, k, lda, ldb, ldc, false,
                       false, OpenMpThreads()},
               a, b, nullptr, c);
  } catch (const dnnl::error& error) {
    return Status::Internal(op, ": oneDNN bf16 matmul (", transa, transb, ", m=", m, ", n=", n,
                            ", k=", k, ") failed: ", error.what());
  }
}

int64_t CachedMatmuls() {
  std::lock_guard<std::mutex> lock(CacheMutex());
  return static_cast<int64_t>(Cache().size());
}

Status F32LinearForward(const char* op, int64_t m, int64_t n, int64_t k, const float* x,
                        const float* w, const float* bias, bool relu, float* y) {
  try {
    return Run(GemmKey{dnnl::memory::data_type::f32, 'N', 'T', m, n, k, k, k, n, true, relu,
                       OpenMpThreads()},
               x, w, bias, y);
  } catch (const dnnl::error& error) {
    return Status::Internal(op, ": oneDNN f32 matmul (m=", m, ", n=", n, ", k=", k,
                            relu ? ", bias and ReLU" : ", bias", ") failed: ", error.what());
  }
}

}  // namespace ember::ops::internal
