// DCN-v2 cross layers on CUDA, composed of the fully connected layer's GEMMs
// (ops/cuda/blas.h) and elementwise kernels, in the order of the CPU
// operators (ops/cross_layer.cc).

#include <initializer_list>
#include <utility>

#include "ops/cuda/blas.h"
#include "ops/cuda/common.h"
#include "ops/cuda/kernels.h"
#include "ops/dense_ops_cuda.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

using cuda::DeviceScratch;

Status CheckActivations(const char* op, const Tensor& x0, const Tensor& xl, const Device& device,
                        int64_t* batch, int64_t* dim) {
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(op, "x0", x0, DType::kF32, 2, device));
  *batch = x0.dim(0);
  *dim = x0.dim(1);
  return cuda::CheckDeviceTensor(op, "xl", xl, DType::kF32, {*batch, *dim}, device);
}

Status CheckFactors(const char* op, const Tensor& u, const Tensor& v, int64_t dim,
                    const Device& device, int64_t* rank) {
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceRank(op, "u", u, DType::kF32, 2, device));
  *rank = u.dim(1);
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(op, "u", u, DType::kF32, {dim, *rank}, device));
  return cuda::CheckDeviceTensor(op, "v", v, DType::kF32, {dim, *rank}, device);
}

Status Output(const char* op, const char* name, const Tensor* t, std::vector<int64_t> shape,
              const Device& device) {
  return cuda::CheckDeviceOutput(op, name, t, DType::kF32, shape, device);
}

// Both of saved_t and saved_z or neither (low rank).
Status CheckSavedPair(const char* op, const Tensor* saved_t, const Tensor* saved_z) {
  if ((saved_t == nullptr) != (saved_z == nullptr)) {
    return Status::InvalidArgument(op, ": saved_t and saved_z go together (both or neither)");
  }
  return Status::OK();
}

}  // namespace

Status CrossLayerForwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                             const Tensor& bias, Tensor* out, CudaStream& stream, Tensor* saved_z) {
  constexpr const char* kOp = "CrossLayerForwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, dim = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, device, &batch, &dim));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "weight", weight, DType::kF32, {dim, dim}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "bias", bias, DType::kF32, {dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "out", out, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"out", out}}, {{"x0", &x0}, {"xl", &xl}, {"weight", &weight}, {"bias", &bias}}));
  if (saved_z != nullptr) {
    EMBER_RETURN_IF_ERROR(Output(kOp, "saved_z", saved_z, {batch, dim}, device));
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"out", out}, {"saved_z", saved_z}},
                       {{"x0", &x0}, {"xl", &xl}, {"weight", &weight}, {"bias", &bias}}));
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * dim == 0) return Status::OK();
  DeviceScratch scratch(stream);
  float* z = saved_z != nullptr ? saved_z->data<float>() : nullptr;
  if (z == nullptr) {
    EMBER_ASSIGN_OR_RETURN(z, scratch.Get<float>(kOp, batch * dim));
  }
  // z = xl W^T + bias, then out = x0 * z + xl.
  EMBER_RETURN_IF_ERROR(cuda::FullyConnectedForwardRaw(
      kOp, stream, xl.data<float>(), weight.data<float>(), bias.data<float>(), batch, dim, dim,
      Activation::kNone, ComputePrecision::kF32, z));
  cuda::LaunchCrossOutput(x0.data<float>(), z, xl.data<float>(), out->data<float>(), batch * dim,
                          cuda::Native(stream));
  return cuda::CheckLaunch(kOp, "CrossOutputKernel");
}

Status CrossLayerBackwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& weight,
                              const Tensor& bias, const Tensor& dout, Tensor* dx0, Tensor* dxl,
                              Tensor* dweight, Tensor* dbias, CudaStream& stream,
                              const Tensor* saved_z) {
  constexpr const char* kOp = "CrossLayerBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, dim = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, device, &batch, &dim));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "weight", weight, DType::kF32, {dim, dim}, device));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "bias", bias, DType::kF32, {dim}, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dx0", dx0, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dxl", dxl, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dweight", dweight, {dim, dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dbias", dbias, {dim}, device));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"dx0", dx0}, {"dxl", dxl}, {"dweight", dweight}, {"dbias", dbias}},
      {{"x0", &x0}, {"xl", &xl}, {"weight", &weight}, {"bias", &bias}, {"dout", &dout}}));
  if (saved_z != nullptr) {
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceTensor(kOp, "saved_z", *saved_z, DType::kF32, {batch, dim}, device));
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"dx0", dx0}, {"dxl", dxl}, {"dweight", dweight}, {"dbias", dbias}},
                       {{"saved_z", saved_z}}));
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  DeviceScratch scratch(stream);
  const float* z = saved_z != nullptr ? saved_z->data<float>() : nullptr;
  EMBER_ASSIGN_OR_RETURN(float* g, scratch.Get<float>(kOp, batch * dim));
  // z = xl W^T + bias (saved by the forward, or recomputed here); dx0 = dout
  // * z and g = dout * x0; the fully connected backward of g gives
  // dxl - dout = g W, dweight = g^T xl, dbias = sum_b g.
  if (z == nullptr) {
    EMBER_ASSIGN_OR_RETURN(float* recomputed, scratch.Get<float>(kOp, batch * dim));
    EMBER_RETURN_IF_ERROR(cuda::FullyConnectedForwardRaw(
        kOp, stream, xl.data<float>(), weight.data<float>(), bias.data<float>(), batch, dim, dim,
        Activation::kNone, ComputePrecision::kF32, recomputed));
    z = recomputed;
  }
  cuda::LaunchCrossGradients(dout.data<float>(), z, x0.data<float>(), dx0->data<float>(), g,
                             batch * dim, s);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "CrossGradientsKernel"));
  EMBER_RETURN_IF_ERROR(cuda::FullyConnectedBackwardRaw(
      kOp, stream, xl.data<float>(), weight.data<float>(), z, g, batch, dim, dim,
      Activation::kNone, ComputePrecision::kF32, dxl->data<float>(), dweight->data<float>(),
      dbias->data<float>()));
  cuda::LaunchAccumulate(dout.data<float>(), dxl->data<float>(), batch * dim, s);
  return cuda::CheckLaunch(kOp, "AccumulateKernel");
}

Status LowRankCrossLayerForwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                    const Tensor& v, const Tensor& bias, Tensor* out,
                                    CudaStream& stream, Tensor* saved_t, Tensor* saved_z) {
  constexpr const char* kOp = "LowRankCrossLayerForwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, dim = 0, rank = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, device, &batch, &dim));
  EMBER_RETURN_IF_ERROR(CheckFactors(kOp, u, v, dim, device, &rank));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "bias", bias, DType::kF32, {dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "out", out, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"out", out}}, {{"x0", &x0}, {"xl", &xl}, {"u", &u}, {"v", &v}, {"bias", &bias}}));
  EMBER_RETURN_IF_ERROR(CheckSavedPair(kOp, saved_t, saved_z));
  const bool save = saved_t != nullptr;
  if (save) {
    EMBER_RETURN_IF_ERROR(Output(kOp, "saved_t", saved_t, {batch, rank}, device));
    EMBER_RETURN_IF_ERROR(Output(kOp, "saved_z", saved_z, {batch, dim}, device));
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"out", out}, {"saved_t", saved_t}, {"saved_z", saved_z}},
                       {{"x0", &x0}, {"xl", &xl}, {"u", &u}, {"v", &v}, {"bias", &bias}}));
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  if (batch * dim == 0) return Status::OK();
  DeviceScratch scratch(stream);
  // Scratch where nothing is saved, and for an empty saved t (r = 0), whose
  // memory may be null where the GEMMs want a valid pointer.
  float* t = save ? saved_t->data<float>() : nullptr;
  float* z = save ? saved_z->data<float>() : nullptr;
  if (t == nullptr) {
    EMBER_ASSIGN_OR_RETURN(t, scratch.Get<float>(kOp, batch * rank));
  }
  if (z == nullptr) {
    EMBER_ASSIGN_OR_RETURN(z, scratch.Get<float>(kOp, batch * dim));
  }
  // t [B, r] = xl V; z = t U^T + bias (a fully connected layer with weight U
  // [d, r]); out = x0 * z + xl.
  EMBER_RETURN_IF_ERROR(cuda::RowMajorSgemm(kOp, stream, false, false, batch, rank, dim, 1.0f,
                                            xl.data<float>(), v.data<float>(), 0.0f, t));
  EMBER_RETURN_IF_ERROR(cuda::FullyConnectedForwardRaw(kOp, stream, t, u.data<float>(),
                                                       bias.data<float>(), batch, rank, dim,
                                                       Activation::kNone,
                                                       ComputePrecision::kF32, z));
  cuda::LaunchCrossOutput(x0.data<float>(), z, xl.data<float>(), out->data<float>(), batch * dim,
                          cuda::Native(stream));
  return cuda::CheckLaunch(kOp, "CrossOutputKernel");
}

Status LowRankCrossLayerBackwardCuda(const Tensor& x0, const Tensor& xl, const Tensor& u,
                                     const Tensor& v, const Tensor& bias, const Tensor& dout,
                                     Tensor* dx0, Tensor* dxl, Tensor* du, Tensor* dv,
                                     Tensor* dbias, CudaStream& stream, const Tensor* saved_t,
                                     const Tensor* saved_z) {
  constexpr const char* kOp = "LowRankCrossLayerBackwardCuda";
  const Device device = Device::Cuda(stream.device());
  int64_t batch = 0, dim = 0, rank = 0;
  EMBER_RETURN_IF_ERROR(CheckActivations(kOp, x0, xl, device, &batch, &dim));
  EMBER_RETURN_IF_ERROR(CheckFactors(kOp, u, v, dim, device, &rank));
  EMBER_RETURN_IF_ERROR(cuda::CheckDeviceTensor(kOp, "bias", bias, DType::kF32, {dim}, device));
  EMBER_RETURN_IF_ERROR(
      cuda::CheckDeviceTensor(kOp, "dout", dout, DType::kF32, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dx0", dx0, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dxl", dxl, {batch, dim}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "du", du, {dim, rank}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dv", dv, {dim, rank}, device));
  EMBER_RETURN_IF_ERROR(Output(kOp, "dbias", dbias, {dim}, device));
  EMBER_RETURN_IF_ERROR(CheckNoOverlap(
      kOp, {{"dx0", dx0}, {"dxl", dxl}, {"du", du}, {"dv", dv}, {"dbias", dbias}},
      {{"x0", &x0}, {"xl", &xl}, {"u", &u}, {"v", &v}, {"bias", &bias}, {"dout", &dout}}));
  EMBER_RETURN_IF_ERROR(CheckSavedPair(kOp, saved_t, saved_z));
  const bool saved = saved_t != nullptr;
  if (saved) {
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceTensor(kOp, "saved_t", *saved_t, DType::kF32, {batch, rank}, device));
    EMBER_RETURN_IF_ERROR(
        cuda::CheckDeviceTensor(kOp, "saved_z", *saved_z, DType::kF32, {batch, dim}, device));
    EMBER_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, {{"dx0", dx0}, {"dxl", dxl}, {"du", du}, {"dv", dv}, {"dbias", dbias}},
                       {{"saved_t", saved_t}, {"saved_z", saved_z}}));
  }
  EMBER_RETURN_IF_ERROR(cuda::UseDevice(kOp, stream));
  const cudaStream_t s = cuda::Native(stream);
  DeviceScratch scratch(stream);
  EMBER_ASSIGN_OR_RETURN(float* dt, scratch.Get<float>(kOp, batch * rank));
  EMBER_ASSIGN_OR_RETURN(float* g, scratch.Get<float>(kOp, batch * dim));
  // t = xl V and z = t U^T + bias as in the forward (saved by it, or
  // recomputed here); dx0 = dout * z and g = dout * x0. The fully connected
  // backward of z = t U^T + bias with gradient g gives dt = g U, du = g^T t
  // and dbias = sum_b g; then dxl = dt V^T + dout and dv = xl^T dt.
  // Empty saved tensors (B = 0 or r = 0) may have null memory where the
  // GEMMs want valid pointers: then recompute, which costs nothing there.
  const bool use_saved = saved && batch > 0 && rank > 0;
  const float* t = use_saved ? saved_t->data<float>() : nullptr;
  const float* z = use_saved ? saved_z->data<float>() : nullptr;
  if (!use_saved) {
    EMBER_ASSIGN_OR_RETURN(float* recomputed_t, scratch.Get<float>(kOp, batch * rank));
    EMBER_ASSIGN_OR_RETURN(float* recomputed_z, scratch.Get<float>(kOp, batch * dim));
    EMBER_RETURN_IF_ERROR(cuda::RowMajorSgemm(kOp, stream, false, false, batch, rank, dim, 1.0f,
                                              xl.data<float>(), v.data<float>(), 0.0f,
                                              recomputed_t));
    EMBER_RETURN_IF_ERROR(cuda::FullyConnectedForwardRaw(
        kOp, stream, recomputed_t, u.data<float>(), bias.data<float>(), batch, rank, dim,
        Activation::kNone, ComputePrecision::kF32, recomputed_z));
    t = recomputed_t;
    z = recomputed_z;
  }
  cuda::LaunchCrossGradients(dout.data<float>(), z, x0.data<float>(), dx0->data<float>(), g,
                             batch * dim, s);
  EMBER_RETURN_IF_ERROR(cuda::CheckLaunch(kOp, "CrossGradientsKernel"));
  EMBER_RETURN_IF_ERROR(cuda::FullyConnectedBackwardRaw(
      kOp, stream, t, u.data<float>(), z, g, batch, rank, dim, Activation::kNone,
      ComputePrecision::kF32, dt, du->data<float>(), dbias->data<float>()));
  // dxl = dout, then += dt V^T.
  if (batch * dim > 0) {
    EMBER_RETURN_IF_ERROR(cuda::CudaCall(
        cudaMemcpyAsync(dxl->raw_data(), dout.raw_data(), dout.nbytes(), cudaMemcpyDeviceToDevice,
                        s),
        kOp, "cudaMemcpyAsync"));
  }
  EMBER_RETURN_IF_ERROR(cuda::RowMajorSgemm(kOp, stream, false, true, batch, dim, rank, 1.0f, dt,
                                            v.data<float>(), 1.0f, dxl->data<float>()));
  return cuda::RowMajorSgemm(kOp, stream, true, false, dim, rank, batch, 1.0f, xl.data<float>(),
                             dt, 0.0f, dv->data<float>());
}

}  // namespace ember::ops
