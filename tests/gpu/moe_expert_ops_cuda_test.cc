// The CUDA kernels of moe_expert_fc and moe_balance (ops/moe_expert_ops.h)
// against their CPU kernels, both taken from the registry and given the same
// KernelContext: forward and backward, with k = 1 and 2, capacities that
// leave padding rows (capacity factors that drop rows, and a capacity of 0),
// both activations, batch 1 and empty batches. The expert layers agree within
// kCudaRelativeTolerance (cuBLAS and oneDNN sum in different orders); the
// balance loss, whose CUDA kernel repeats the CPU's f64 arithmetic, bit for
// bit. Outputs start as NaN, so an element a kernel fails to write (a padding
// row) cannot pass for the zero that fresh device memory usually holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"
#include "ops/moe_routing_ops.h"
#include "ops/op_registry.h"
#include "ops/precision.h"
#include "tests/gpu/device_tensors.h"

namespace ember::ops {
namespace {

using ember::testing::ExpectClose;
using ember::testing::RandomHost;
using ember::testing::SameBits;

const KernelPair& KernelOf(const std::string& op, DeviceType device) {
  Result<const KernelPair*> kernel = DefaultOpRegistry().FindKernel(op, device);
  CHECK(kernel.ok()) << kernel.status();
  return **kernel;
}

class MoeExpertOpsCudaTest : public ember::testing::CudaStreamTest {
 protected:
  Tensor Up(const Tensor& host) { return ember::testing::Up(host, stream()); }
  Tensor Down(const Tensor& device) { return ember::testing::Down(device, stream()); }

  // A device f32 tensor filled with NaN.
  Tensor Poisoned(std::vector<int64_t> shape) {
    Tensor host = Tensor::Empty(std::move(shape));
    std::fill_n(host.data<float>(), host.numel(), std::nanf(""));
    return Up(host);
  }
};

// --- moe_expert_fc ----------------------------------------------------------------------

struct ExpertFcCase {
  int64_t batch, slots, in, out, experts, k;
  double capacity_factor;  // 0: none
  int activation;          // 0 none, 1 relu
};

void PrintTo(const ExpertFcCase& c, std::ostream* os) {
  *os << "batch" << c.batch << "_slots" << c.slots << "_in" << c.in << "_out" << c.out << "_experts"
      << c.experts << "_k" << c.k << "_factor" << c.capacity_factor << "_act" << c.activation;
}

OpAttrs ExpertFcAttrs(const ExpertFcCase& c) {
  OpAttrs attrs;
  attrs.Set("activation", c.activation).Set("k", c.k).Set("slots", c.slots);
  if (c.capacity_factor > 0) attrs.Set("capacity_factor", c.capacity_factor);
  return attrs;
}

class ExpertFcCudaTest : public MoeExpertOpsCudaTest,
                         public ::testing::WithParamInterface<ExpertFcCase> {};

TEST_P(ExpertFcCudaTest, ForwardAndBackwardMatchTheCpuKernel) {
  const ExpertFcCase& p = GetParam();
  const OpAttrs attrs = ExpertFcAttrs(p);
  // What the case is about: the rows past the experts' buffers.
  const int64_t capacity =
      p.batch == 0 ? 0 : MoeNodeCapacity(p.batch, p.experts, p.slots, p.k, attrs);
  SCOPED_TRACE("capacity " + std::to_string(capacity) + ", padding rows " +
               std::to_string(p.batch * p.slots - p.experts * capacity));
  RandomStream random(static_cast<uint64_t>(p.batch * 131 + p.in * 7 + p.experts));
  const Tensor x = RandomHost({p.batch, p.slots, p.in}, random);
  const Tensor w = RandomHost({p.experts, p.out, p.in}, random);
  const Tensor b = RandomHost({p.experts, p.out}, random);
  const Tensor dy = RandomHost({p.batch, p.slots, p.out}, random);

  Tensor y = Tensor::Empty({p.batch, p.slots, p.out});
  Tensor dx = Tensor::Empty(x.shape()), dw = Tensor::Empty(w.shape()),
         db = Tensor::Empty(b.shape());
  const KernelPair& cpu = KernelOf("moe_expert_fc", DeviceType::kCpu);
  KernelContext c;
  c.attrs = &attrs;
  c.inputs = {&x, &w, &b};
  c.outputs = {&y};
  ASSERT_TRUE(cpu.forward(c).ok());
  c.output_grads = {&dy};
  c.input_grads = {&dx, &dw, &db};
  ASSERT_TRUE(cpu.backward(c).ok());

  const Tensor gx = Up(x), gw = Up(w), gb = Up(b), gdy = Up(dy);
  Tensor gy = Poisoned(y.shape());
  const KernelPair& gpu = KernelOf("moe_expert_fc", DeviceType::kCuda);
  KernelContext g;
  g.attrs = &attrs;
  g.stream = &stream();
  g.inputs = {&gx, &gw, &gb};
  g.outputs = {&gy};
  const Status forward = gpu.forward(g);
  ASSERT_TRUE(forward.ok()) << forward;
  ExpectClose(y, Down(gy), "y");

  // The backward from the CPU's y, so that both take the same ReLU mask
  // (a y rounded to 0 on one device only would change a row of dx).
  Tensor cpu_y = Up(y);
  Tensor gdx = Poisoned(x.shape()), gdw = Poisoned(w.shape()), gdb = Poisoned(b.shape());
  g.outputs = {&cpu_y};
  g.output_grads = {&gdy};
  g.input_grads = {&gdx, &gdw, &gdb};
  const Status backward = gpu.backward(g);
  ASSERT_TRUE(backward.ok()) << backward;
  ExpectClose(dx, Down(gdx), "dx");
  ExpectClose(dw, Down(gdw), "dweight");
  ExpectClose(db, Down(gdb), "dbias");

  // Only the bias' gradient wanted: the others' scratch does not change it.
  Tensor gdb_alone = Poisoned(b.shape());
  g.input_grads = {nullptr, nullptr, &gdb_alone};
  ASSERT_TRUE(gpu.backward(g).ok());
  ExpectClose(db, Down(gdb_alone), "dbias alone");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ExpertFcCudaTest,
    ::testing::Values(
        // No capacity factor: capacity 7 * 2 / 3 = 4, 2 padding rows.
        ExpertFcCase{7, 2, 5, 3, 3, 1, 0.0, 1},
        // k = 2, factor 1: capacity min(27 / 4, ceil(18 / 4)) = 5, 7 padding rows.
        ExpertFcCase{9, 3, 6, 4, 4, 2, 1.0, 0},
        // k = 2, factor 0.75: capacity min(66 / 5, ceil(9.9)) = 10, 16 padding rows.
        ExpertFcCase{33, 2, 17, 9, 5, 2, 0.75, 1},
        // k = 1, factor 1.25: capacity min(133 / 4, ceil(41.6)) = 33, 1 padding row.
        ExpertFcCase{133, 1, 12, 20, 4, 1, 1.25, 0},
        // Wider layers and more experts (the GEMMs block and may split).
        ExpertFcCase{64, 3, 48, 40, 8, 2, 1.25, 1},
        // Batch 1 with 2 experts and 1 slot: capacity 0, every row padding,
        // zero parameter gradients.
        ExpertFcCase{1, 1, 4, 3, 2, 1, 0.0, 1},
        // An empty batch.
        ExpertFcCase{0, 2, 4, 3, 2, 1, 1.0, 0}));

// The layer's arithmetic is the CUDA fully connected layer's at the
// context's precision, expert by expert.
TEST_F(MoeExpertOpsCudaTest, ExpertFcComputesAtTheContextPrecision) {
  const ExpertFcCase p{10, 2, 24, 16, 3, 2, 1.0, 1};
  const OpAttrs attrs = ExpertFcAttrs(p);
  const int64_t capacity = MoeNodeCapacity(p.batch, p.experts, p.slots, p.k, attrs);
  ASSERT_EQ(6, capacity);
  RandomStream random(41);
  const Tensor gx = Up(RandomHost({p.batch, p.slots, p.in}, random));
  const Tensor gw = Up(RandomHost({p.experts, p.out, p.in}, random));
  const Tensor gb = Up(RandomHost({p.experts, p.out}, random));
  for (const ComputePrecision precision : {ComputePrecision::kBf16, ComputePrecision::kF16}) {
    SCOPED_TRACE(static_cast<int>(precision));
    Tensor gy = Poisoned({p.batch, p.slots, p.out});
    KernelContext g;
    g.attrs = &attrs;
    g.stream = &stream();
    g.precision = precision;
    g.inputs = {&gx, &gw, &gb};
    g.outputs = {&gy};
    ASSERT_TRUE(KernelOf("moe_expert_fc", DeviceType::kCuda).forward(g).ok());
    Tensor expected = Tensor::Empty({p.batch * p.slots, p.out});
    std::fill_n(expected.data<float>(), expected.numel(), 0.0f);
    const Tensor x_rows = gx.Reshape({p.batch * p.slots, p.in});
    for (int64_t e = 0; e < p.experts; ++e) {
      Tensor ye = Poisoned({capacity, p.out});
      ASSERT_TRUE(FullyConnectedForwardCuda(x_rows.Slice(e * capacity, (e + 1) * capacity),
                                            gw.Slice(e, e + 1).Reshape({p.out, p.in}),
                                            gb.Slice(e, e + 1).Reshape({p.out}), Activation::kRelu,
                                            &ye, stream(), precision)
                      .ok());
      const Tensor host = Down(ye);
      std::copy_n(host.data<float>(), host.numel(), expected.data<float>() + e * capacity * p.out);
    }
    // Far below the 16-bit rounding (~1e-3) an f32 product would differ by.
    ExpectClose(expected, Down(gy), "y", 1e-6);
  }
}

TEST_F(MoeExpertOpsCudaTest, ExpertFcWithoutAStreamIsFailedPrecondition) {
  const ExpertFcCase p{4, 1, 3, 2, 2, 1, 0.0, 0};
  const OpAttrs attrs = ExpertFcAttrs(p);
  RandomStream random(43);
  const Tensor gx = Up(RandomHost({p.batch, p.slots, p.in}, random));
  const Tensor gw = Up(RandomHost({p.experts, p.out, p.in}, random));
  const Tensor gb = Up(RandomHost({p.experts, p.out}, random));
  Tensor gy = Poisoned({p.batch, p.slots, p.out});
  KernelContext g;
  g.attrs = &attrs;
  g.inputs = {&gx, &gw, &gb};
  g.outputs = {&gy};
  EXPECT_EQ(StatusCode::kFailedPrecondition,
            KernelOf("moe_expert_fc", DeviceType::kCuda).forward(g).code());
}

// --- moe_balance ------------------------------------------------------------------------

struct BalanceCase {
  int64_t batch, experts;
  double weight;
  int64_t loss_examples;  // KernelContext::loss_examples; 0: the batch
};

void PrintTo(const BalanceCase& c, std::ostream* os) {
  *os << "batch" << c.batch << "_experts" << c.experts << "_weight" << c.weight << "_examples"
      << c.loss_examples;
}

// Softmax-like rows: positive, summing to about 1; every third row has its
// two largest probabilities tied (the lower expert wins), and every fifth is
// uniform.
Tensor Probabilities(int64_t batch, int64_t experts, RandomStream& random) {
  Tensor p = RandomHost({batch, experts}, random, 0.01, 1.0);
  float* v = p.data<float>();
  for (int64_t b = 0; b < batch; ++b) {
    float* row = v + b * experts;
    if (b % 5 == 4) std::fill_n(row, experts, 1.0f);
    if (b % 3 == 2 && experts > 1) {
      const int64_t top = std::max_element(row, row + experts) - row;
      row[(top + 1 + b % (experts - 1)) % experts] = row[top];
    }
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += row[e];
    for (int64_t e = 0; e < experts; ++e) row[e] /= sum;
  }
  return p;
}

class BalanceCudaTest : public MoeExpertOpsCudaTest,
                        public ::testing::WithParamInterface<BalanceCase> {};

TEST_P(BalanceCudaTest, ForwardAndBackwardAreBitIdenticalToTheCpuKernel) {
  const BalanceCase& p = GetParam();
  OpAttrs attrs;
  attrs.Set("weight", p.weight);
  RandomStream random(static_cast<uint64_t>(p.batch * 17 + p.experts));
  const Tensor probs = Probabilities(p.batch, p.experts, random);
  const Tensor dout = RandomHost({p.batch, p.experts}, random);
  const Tensor dshare = RandomHost({p.batch, 1}, random);

  Tensor out = Tensor::Empty(probs.shape()), share = Tensor::Empty({p.batch, 1});
  Tensor dprobs = Tensor::Empty(probs.shape());
  const KernelPair& cpu = KernelOf("moe_balance", DeviceType::kCpu);
  KernelContext c;
  c.attrs = &attrs;
  c.loss_examples = p.loss_examples;
  c.inputs = {&probs};
  c.outputs = {&out, &share};
  ASSERT_TRUE(cpu.forward(c).ok());
  c.output_grads = {&dout, &dshare};
  c.input_grads = {&dprobs};
  ASSERT_TRUE(cpu.backward(c).ok());

  const Tensor gprobs = Up(probs), gdout = Up(dout), gdshare = Up(dshare);
  Tensor gout = Poisoned(probs.shape()), gshare = Poisoned({p.batch, 1});
  Tensor gdprobs = Poisoned(probs.shape());
  const KernelPair& gpu = KernelOf("moe_balance", DeviceType::kCuda);
  KernelContext g;
  g.attrs = &attrs;
  g.stream = &stream();
  g.loss_examples = p.loss_examples;
  g.inputs = {&gprobs};
  g.outputs = {&gout, &gshare};
  const Status forward = gpu.forward(g);
  ASSERT_TRUE(forward.ok()) << forward;
  EXPECT_TRUE(SameBits(out, Down(gout))) << "probs out";
  const Tensor host_share = Down(gshare);
  EXPECT_TRUE(SameBits(share, host_share)) << "share";
  ExpectClose(share, host_share, "share");
  g.output_grads = {&gdout, &gdshare};
  g.input_grads = {&gdprobs};
  const Status backward = gpu.backward(g);
  ASSERT_TRUE(backward.ok()) << backward;
  const Tensor host_dprobs = Down(gdprobs);
  EXPECT_TRUE(SameBits(dprobs, host_dprobs)) << "dprobs";
  ExpectClose(dprobs, host_dprobs, "dprobs");
}

INSTANTIATE_TEST_SUITE_P(Shapes, BalanceCudaTest,
                         ::testing::Values(BalanceCase{1, 1, 0.5, 0}, BalanceCase{1, 4, 0.5, 0},
                                           BalanceCase{7, 3, 0.01, 0},
                                           // The objective's mean over more examples
                                           // than the kernel's rows (other ranks or
                                           // row ranges), and fewer (the rows win).
                                           BalanceCase{133, 8, 0.1, 500}, BalanceCase{7, 3, 0.2, 3},
                                           // Weight 0: the gradient passes through.
                                           BalanceCase{64, 4, 0.0, 0},
                                           BalanceCase{1000, 16, 0.01, 4096},
                                           BalanceCase{0, 3, 0.1, 0}));

// The balance loss' own formula on a batch whose top-1 fractions are known:
// experts 0, 0, 1, 2 (the second row ties 0 and 1) give f = (1/2, 1/4, 1/4).
TEST_F(MoeExpertOpsCudaTest, BalanceGradientIsWeightTimesExpertsTimesFractionOverExamples) {
  Tensor probs = Tensor::Empty({4, 3});
  const float rows[4][3] = {
      {0.5f, 0.3f, 0.2f}, {0.4f, 0.4f, 0.2f}, {0.1f, 0.6f, 0.3f}, {0.2f, 0.2f, 0.6f}};
  std::copy_n(&rows[0][0], 12, probs.data<float>());
  Tensor zeros = Tensor::Empty({4, 3});
  std::fill_n(zeros.data<float>(), zeros.numel(), 0.0f);
  OpAttrs attrs;
  attrs.Set("weight", 0.5);
  const Tensor gprobs = Up(probs), gzeros = Up(zeros);
  Tensor gout = Poisoned({4, 3}), gshare = Poisoned({4, 1}), gdprobs = Poisoned({4, 3});
  KernelContext g;
  g.attrs = &attrs;
  g.stream = &stream();
  g.loss_examples = 10;
  g.inputs = {&gprobs};
  g.outputs = {&gout, &gshare};
  g.output_grads = {&gzeros, nullptr};
  g.input_grads = {&gdprobs};
  const KernelPair& gpu = KernelOf("moe_balance", DeviceType::kCuda);
  ASSERT_TRUE(gpu.forward(g).ok());
  ASSERT_TRUE(gpu.backward(g).ok());
  const double f[3] = {0.5, 0.25, 0.25};
  const Tensor share = Down(gshare), dprobs = Down(gdprobs);
  for (int64_t b = 0; b < 4; ++b) {
    double sum = 0.0;
    for (int64_t e = 0; e < 3; ++e) {
      sum += f[e] * rows[b][e];
      EXPECT_FLOAT_EQ(static_cast<float>(0.5 * 3 * f[e] / 10), dprobs.data<float>()[b * 3 + e])
          << "b=" << b << " e=" << e;
    }
    EXPECT_FLOAT_EQ(static_cast<float>(3.0 / 10 * sum), share.data<float>()[b]) << "b=" << b;
  }
}

}  // namespace
}  // namespace ember::ops
