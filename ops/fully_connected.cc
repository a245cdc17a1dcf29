// Fully connected layer on oneDNN inner-product primitives. The primitives
// read and write the callers' tensors in place (plain nc / oi / x layouts, so
// no reorders) and are cached by shape, so a training loop builds each one once.

#include "ops/dense_ops.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/mutex.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// More shapes than a model ever uses; past it the cache starts afresh rather
// than grow without bound when a caller varies the batch size freely.
constexpr size_t kMaxCachedPrimitives = 512;

enum class PrimitiveKind { kForward, kBackwardData, kBackwardWeights };

struct PrimitiveKey {
  int64_t batch;
  int64_t in;
  int64_t out;
  Activation activation;  // kNone for the backward kinds: ReLU is masked by hand.
  PrimitiveKind kind;
  auto operator<=>(const PrimitiveKey&) const = default;
};

struct CachedPrimitive {
  dnnl::primitive primitive;
  memory::desc scratchpad;
};

// oneDNN constructors throw dnnl::error; every caller of this file's helpers
// runs them inside a try block.
const dnnl::engine& CpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Activations [rows, features] (nc), weights [out, in] (oi), bias [out] (x):
// exactly the row-major layouts of the callers' tensors.
memory::desc Activations(int64_t rows, int64_t features) {
  return memory::desc({rows, features}, memory::data_type::f32, Tag::nc);
}
memory::desc Weights(int64_t out, int64_t in) {
  return memory::desc({out, in}, memory::data_type::f32, Tag::oi);
}
memory::desc Vector(int64_t size) { return memory::desc({size}, memory::data_type::f32, Tag::x); }

// User scratchpads: each call brings its own, so concurrent calls from several
// threads never share oneDNN's internal one.
dnnl::primitive_attr Attributes(Activation activation) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (activation == Activation::kRelu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

dnnl::inner_product_forward::primitive_desc ForwardDesc(const PrimitiveKey& key,
                                                        Activation activation) {
  const dnnl::inner_product_forward::desc desc(
      dnnl::prop_kind::forward_training, Activations(key.batch, key.in), Weights(key.out, key.in),
      Vector(key.out), Activations(key.batch, key.out));
  return dnnl::inner_product_forward::primitive_desc(desc, Attributes(activation), CpuEngine());
}

CachedPrimitive BuildPrimitive(const PrimitiveKey& key) {
  switch (key.kind) {
    case PrimitiveKind::kForward: {
      const auto pd = ForwardDesc(key, key.activation);
      return {dnnl::inner_product_forward(pd), pd.scratchpad_desc()};
    }
    case PrimitiveKind::kBackwardData: {
      const dnnl::inner_product_backward_data::desc desc(Activations(key.batch, key.in),
                                                         Weights(key.out, key.in),
                                                         Activations(key.batch, key.out));
      const dnnl::inner_product_backward_data::primitive_desc pd(
          desc, Attributes(Activation::kNone), CpuEngine(), ForwardDesc(key, Activation::kNone));
      return {dnnl::inner_product_backward_data(pd), pd.scratchpad_desc()};
    }
    case PrimitiveKind::kBackwardWeights: {
      const dnnl::inner_product_backward_weights::desc desc(
          Activations(key.batch, key.in), Weights(key.out, key.in), Vector(key.out),
          Activations(key.batch, key.out));
      const dnnl::inner_product_backward_weights::primitive_desc pd(
          desc, Attributes(Activation::kNone), CpuEngine(), ForwardDesc(key, Activation::kNone));
      return {dnnl::inner_product_backward_weights(pd), pd.scratchpad_desc()};
    }
  }
  LOG(FATAL) << "unknown PrimitiveKind " << static_cast<int>(key.kind);
}

// Thread safety: Get may be called concurrently; the primitives it returns
// are immutable and may be executed concurrently (each call has its own
// stream and scratchpad).
class PrimitiveCache {
 public:
  std::shared_ptr<const CachedPrimitive> Get(const PrimitiveKey& key) EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      auto it = primitives_.find(key);
      if (it != primitives_.end()) return it->second;
    }
    // Built outside the lock (it takes milliseconds); a concurrent builder of
    // the same key wins the insertion and both results are equivalent.
    auto built = std::make_shared<const CachedPrimitive>(BuildPrimitive(key));
    MutexLock lock(mu_);
    if (primitives_.size() >= kMaxCachedPrimitives) primitives_.clear();
    return primitives_.emplace(key, std::move(built)).first->second;
  }

 private:
  Mutex mu_;
  std::map<PrimitiveKey, std::shared_ptr<const CachedPrimitive>> primitives_ GUARDED_BY(mu_);
};

PrimitiveCache& Cache() {
  static PrimitiveCache* cache = new PrimitiveCache();  // never destroyed: used at exit
  return *cache;
}

// A 64-byte-aligned byte buffer that only grows; one per thread.
class ScratchBuffer {
 public:
  void* Get(size_t bytes) {
    if (bytes > capacity_) {
      storage_.reset(new (std::align_val_t{64}) uint8_t[bytes]);
      capacity_ = bytes;
    }
    return storage_.get();
  }

 private:
  struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<uint8_t[], AlignedDelete> storage_;
  size_t capacity_ = 0;
};

memory Wrap(const memory::desc& desc, const Tensor& tensor) {
  return memory(desc, CpuEngine(), tensor.raw_data());
}

void Execute(const CachedPrimitive& cached, std::unordered_map<int, memory> args) {
  thread_local ScratchBuffer scratchpad;
  const size_t bytes = cached.scratchpad.get_size();
  if (bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 memory(cached.scratchpad, CpuEngine(), scratchpad.Get(bytes)));
  }
  dnnl::stream stream(CpuEngine());
  cached.primitive.execute(stream, args);
  stream.wait();
}

Status DnnlFailure(const char* op, const dnnl::error& e) {
  return Status::Internal(op, ": oneDNN failed: ", e.what(), " (dnnl_status_t ",
                          static_cast<int>(e.status), ")");
}

// y = act(bias) for every row: the product of an empty `in` dimension.
void BroadcastBias(const Tensor& bias, Activation activation, int64_t batch, Tensor* y) {
  const int64_t out = bias.dim(0);
  const float* b = bias.data<float>();
  float* dst = y->data<float>();
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      const float v = b[o];
      dst[r * out + o] = activation == Activation::kRelu && v < 0.0f ? 0.0f : v;
    }
  }
}

Status CheckForwardArguments(const char* op, const Tensor& x, const Tensor& weight,
                             const Tensor& bias) {
  EMBER_RETURN_IF_ERROR(CheckRank(op, "x", x, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckRank(op, "weight", weight, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckTensor(op, "weight", weight, DType::kF32, {weight.dim(0), x.dim(1)}));
  return CheckTensor(op, "bias", bias, DType::kF32, {weight.dim(0)});
}

}  // namespace

Status FullyConnectedForward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             Activation activation, Tensor* y) {
  constexpr const char* kOp = "FullyConnectedForward";
  EMBER_RETURN_IF_ERROR(CheckForwardArguments(kOp, x, weight, bias));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "y", y, DType::kF32, {batch, out}));
  if (batch == 0 || out == 0) return Status::OK();
  if (in == 0) {
    BroadcastBias(bias, activation, batch, y);
    return Status::OK();
  }
  try {
    const PrimitiveKey key{batch, in, out, activation, PrimitiveKind::kForward};
    const auto cached = Cache().Get(key);
    Execute(*cached, {{DNNL_ARG_SRC, Wrap(Activations(batch, in), x)},
                      {DNNL_ARG_WEIGHTS, Wrap(Weights(out, in), weight)},
                      {DNNL_ARG_BIAS, Wrap(Vector(out), bias)},
                      {DNNL_ARG_DST, Wrap(Activations(batch, out), *y)}});
  } catch (const dnnl::error& e) {
    return DnnlFailure(kOp, e);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(kOp, ": out of host memory");
  }
  return Status::OK();
}

namespace {

// dy * (y > 0) into a per-thread buffer: the gradient through the ReLU.
const float* MaskedGradient(const Tensor& y, const Tensor& dy) {
  thread_local ScratchBuffer buffer;
  const int64_t n = dy.numel();
  float* masked = static_cast<float*>(buffer.Get(static_cast<size_t>(n) * sizeof(float)));
  const float* yv = y.data<float>();
  const float* g = dy.data<float>();
  // Both operands are loaded unconditionally so that the select vectorizes; a
  // load of g[i] under the condition compiles to a branch that mispredicts on
  // half of the elements and took longer than one of the three GEMMs at DLRM
  // shapes (2.3 ms against 1.8 ms at batch 2048, 512 -> 256).
  for (int64_t i = 0; i < n; ++i) {
    const float grad = g[i];
    masked[i] = yv[i] > 0.0f ? grad : 0.0f;
  }
  return masked;
}

// dbias = column sums of `grad`, for the degenerate in == 0 layer.
void ColumnSums(const float* grad, int64_t batch, int64_t out, Tensor* dbias) {
  if (out == 0) return;
  float* db = dbias->data<float>();
  std::memset(db, 0, static_cast<size_t>(out) * sizeof(float));
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t o = 0; o < out; ++o) db[o] += grad[r * out + o];
  }
}

}  // namespace

Status FullyConnectedBackward(const Tensor& x, const Tensor& weight, const Tensor& y,
                              const Tensor& dy, Activation activation, Tensor* dx, Tensor* dweight,
                              Tensor* dbias) {
  constexpr const char* kOp = "FullyConnectedBackward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "x", x, DType::kF32, 2));
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "weight", weight, DType::kF32, 2));
  const int64_t batch = x.dim(0), in = x.dim(1), out = weight.dim(0);
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "weight", weight, DType::kF32, {out, in}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "y", y, DType::kF32, {batch, out}));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dy", dy, DType::kF32, {batch, out}));
  if (dx != nullptr) EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dx", dx, DType::kF32, {batch, in}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dweight", dweight, DType::kF32, {out, in}));
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "dbias", dbias, DType::kF32, {out}));

  try {
    const float* grad = activation == Activation::kRelu ? MaskedGradient(y, dy) : dy.data<float>();
    if (batch == 0 || out == 0 || in == 0) {
      // Products over an empty dimension are zero; oneDNN is not asked for them.
      dweight->SetZero();
      if (dx != nullptr) dx->SetZero();
      ColumnSums(grad, batch, out, dbias);
      return Status::OK();
    }
    const memory grad_memory(Activations(batch, out), CpuEngine(), const_cast<float*>(grad));
    const PrimitiveKey weights_key{batch, in, out, Activation::kNone,
                                   PrimitiveKind::kBackwardWeights};
    Execute(*Cache().Get(weights_key), {{DNNL_ARG_SRC, Wrap(Activations(batch, in), x)},
                                        {DNNL_ARG_DIFF_DST, grad_memory},
                                        {DNNL_ARG_DIFF_WEIGHTS, Wrap(Weights(out, in), *dweight)},
                                        {DNNL_ARG_DIFF_BIAS, Wrap(Vector(out), *dbias)}});
    if (dx != nullptr) {
      const PrimitiveKey data_key{batch, in, out, Activation::kNone, PrimitiveKind::kBackwardData};
      Execute(*Cache().Get(data_key), {{DNNL_ARG_DIFF_DST, grad_memory},
                                       {DNNL_ARG_WEIGHTS, Wrap(Weights(out, in), weight)},
                                       {DNNL_ARG_DIFF_SRC, Wrap(Activations(batch, in), *dx)}});
    }
  } catch (const dnnl::error& e) {
    return DnnlFailure(kOp, e);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(kOp, ": out of host memory");
  }
  return Status::OK();
}

}  // namespace ember::ops
