// The graph executor on a CUDA device against the same graph on the CPU:
// the same initial parameters bit for bit, outputs and gradients within
// kCudaRelativeTolerance (tests/gpu/device_tensors.h), gradients of values
// with several consumers accumulated on the device, and the refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/graph.h"
#include "ops/graph_executor.h"
#include "ops/op_registry.h"
#include "tests/gpu/device_tensors.h"
#include "tests/ops/gradient_check.h"

namespace ember::ops {
namespace {

using ember::testing::Down;
using ember::testing::ExpectClose;
using ember::testing::SameBits;
using ember::testing::Up;
using testing::RandomTensor;

// x [5] -> h = relu(fc(x)) [7] -> a = fc(h), b = fc(h) [3];
// y = add(add(add(a, a), b), a). h has two consumers, a three, one of them
// reading it twice: the backward adds their gradients on the device.
void BuildGraph(Graph* graph) {
  const int x = *graph->AddInput("x", {5});
  auto layer = [&](const std::string& name, int in, int64_t in_width, int64_t out_width,
                   int activation) {
    const int w = *graph->AddParameter(name + ".weight", {out_width, in_width},
                                       Initializer::kHeUniform, in_width);
    const int b = *graph->AddParameter(name + ".bias", {out_width}, Initializer::kZeros);
    return graph
        ->AddNode(name, "fully_connected", {in, w, b}, OpAttrs().Set("activation", activation))
        ->at(0);
  };
  const int h = layer("h", x, 5, 7, 1);
  const int a = layer("a", h, 7, 3, 0);
  const int b = layer("b", h, 7, 3, 0);
  const int aa = graph->AddNode("aa", "add", {a, a})->at(0);
  const int aab = graph->AddNode("aab", "add", {aa, b})->at(0);
  CHECK(graph->MarkOutput(graph->AddNode("y", "add", {aab, a})->at(0)).ok());
}

using GraphExecutorCudaTest = ember::testing::CudaStreamTest;

TEST_F(GraphExecutorCudaTest, RunsAGraphAsTheCpuExecutorDoes) {
  Graph graph(&DefaultOpRegistry());
  BuildGraph(&graph);
  auto cpu = GraphExecutor::Create(&graph, 3);
  auto gpu = GraphExecutor::Create(&graph, 3, Device::Cuda(0), stream_.get());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ(stream_.get(), (*gpu)->stream());
  const size_t params = (*cpu)->parameters().size();
  for (size_t i = 0; i < params; ++i) {
    EXPECT_EQ(Device::Cuda(0), (*gpu)->parameters()[i].device());
    EXPECT_TRUE(SameBits((*cpu)->parameters()[i], Down((*gpu)->parameters()[i], *stream_)))
        << "initial parameter " << i;
  }
  // Batch 1, odd batches, and back to a batch seen before.
  for (int64_t batch : {1, 7, 130, 7}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    RandomStream random(static_cast<uint64_t>(batch));
    const Tensor x = RandomTensor({batch, 5}, random), dy = RandomTensor({batch, 3}, random);
    ASSERT_TRUE((*cpu)->Forward({x}).ok());
    ASSERT_TRUE((*gpu)->Forward({Up(x, *stream_)}).ok());
    ExpectClose((*cpu)->output(0), Down((*gpu)->output(0), *stream_), "y");
    Tensor dx = Tensor::Empty({batch, 5});
    Result<Tensor> gpu_dx = Tensor::Allocate({batch, 5}, DType::kF32, Device::Cuda(0));
    ASSERT_TRUE(gpu_dx.ok()) << gpu_dx.status();
    ASSERT_TRUE((*cpu)->Backward({dy}, {&dx}).ok());
    const Status status = (*gpu)->Backward({Up(dy, *stream_)}, {&*gpu_dx});
    ASSERT_TRUE(status.ok()) << status;
    ExpectClose(dx, Down(*gpu_dx, *stream_), "dx");
    for (size_t i = 0; i < params; ++i) {
      ExpectClose((*cpu)->gradients()[i], Down((*gpu)->gradients()[i], *stream_),
                  graph.values()[graph.parameters()[i]].name + " gradient");
    }
  }
}

TEST_F(GraphExecutorCudaTest, MakesItsOwnStreamWhenGivenNone) {
  Graph graph(&DefaultOpRegistry());
  BuildGraph(&graph);
  auto gpu = GraphExecutor::Create(&graph, 3, Device::Cuda(0));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_NE(nullptr, (*gpu)->stream());
  EXPECT_EQ(0, (*gpu)->stream()->device());
  RandomStream random(1);
  const Tensor x = RandomTensor({4, 5}, random);
  Result<Tensor> on_device = Tensor::Allocate({4, 5}, DType::kF32, Device::Cuda(0));
  ASSERT_TRUE(on_device.ok());
  ASSERT_TRUE((*gpu)->stream()->CopyToDevice(x.raw_data(), on_device->raw_data(), x.nbytes()).ok());
  ASSERT_TRUE((*gpu)->Forward({*on_device}).ok());
  EXPECT_TRUE((*gpu)->stream()->Synchronize().ok());
}

TEST_F(GraphExecutorCudaTest, RefusesTensorsOnTheHostNamingThem) {
  Graph graph(&DefaultOpRegistry());
  BuildGraph(&graph);
  auto gpu = GraphExecutor::Create(&graph, 3, Device::Cuda(0), stream_.get());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  RandomStream random(2);
  const Tensor x = RandomTensor({3, 5}, random), dy = RandomTensor({3, 3}, random);
  Status status = (*gpu)->Forward({x});
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("\"x\""));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("cuda:0"));
  ASSERT_TRUE((*gpu)->Forward({Up(x, *stream_)}).ok());
  status = (*gpu)->Backward({dy}, {nullptr});
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("\"y\""));
}

TEST_F(GraphExecutorCudaTest, AnOpWithoutACudaKernelIsNotFoundNamingIt) {
  OpRegistry registry;
  OpDef def;
  def.name = "cpu_only_identity";
  def.infer = [](const std::vector<InputShape>& in,
                 const OpAttrs&) -> Result<std::vector<std::vector<int64_t>>> {
    return std::vector<std::vector<int64_t>>{in[0].shape};
  };
  ASSERT_TRUE(registry.RegisterOp(def).ok());
  KernelPair kernels;
  kernels.forward = [](KernelContext&) { return Status::OK(); };
  kernels.backward = [](KernelContext&) { return Status::OK(); };
  ASSERT_TRUE(registry.RegisterKernel("cpu_only_identity", DeviceType::kCpu, kernels).ok());
  Graph graph(&registry);
  const int x = *graph.AddInput("x", {2});
  ASSERT_TRUE(graph.MarkOutput(graph.AddNode("id", "cpu_only_identity", {x})->at(0)).ok());
  ASSERT_TRUE(GraphExecutor::Create(&graph, 1).ok());
  auto gpu = GraphExecutor::Create(&graph, 1, Device::Cuda(0), stream_.get());
  EXPECT_EQ(StatusCode::kNotFound, gpu.status().code()) << gpu.status();
  EXPECT_THAT(gpu.status().message(), ::testing::HasSubstr("cpu_only_identity"));
}

}  // namespace
}  // namespace ember::ops
