// Every model of the zoo trained for a few steps on the CPU and on a CUDA
// device from the same seed and the same random inputs: logits, the gradient
// of the pooled embeddings and the parameters agree within
// kCudaRelativeTolerance (tests/gpu/device_tensors.h explains it) at batch 1
// and odd batches. And the model's host copies of its parameters and
// optimizer state, which checkpoints go through.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "engine/model.h"
#include "engine/model_zoo.h"
#include "ops/dense_ops.h"
#include "ops/dense_optimizer.h"
#include "tests/gpu/device_tensors.h"

namespace ember::engine {
namespace {

using ember::testing::ExpectClose;
using ember::testing::SameBits;

struct ZooCase {
  const char* model;
  int64_t batch;
  int num_dense = 4;
  int cross_rank = 0;  // dcn_v2: 0 full rank.
};

ModelOptions Options(const ZooCase& c) {
  ModelOptions options;
  options.name = c.model;
  options.num_dense = c.num_dense;
  options.num_slots = 5;
  options.embedding_dim = 8;
  options.params.Set("bottom_mlp", std::vector<int>{16, 8});
  options.top_mlp = {32, 16};
  options.params.Set("cross_layers", 2);
  options.params.Set("cross_rank", c.cross_rank);
  options.num_tasks = std::string(c.model) == "mmoe" ? 2 : 1;
  options.params.Set("num_experts", 3);
  options.params.Set("expert_mlp", std::vector<int>{16, 8});
  options.seed = 11;
  return options;
}

Tensor RandomHost(std::vector<int64_t> shape, RandomStream& random, double scale) {
  Tensor t = Tensor::Empty(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = static_cast<float>(scale * random.Normal());
  }
  return t;
}

std::string ParameterName(const DenseModel& model, size_t i) {
  return model.graph().values()[model.graph().parameters()[i]].name;
}

// Every model, at batch 1, an odd batch and a larger odd batch; DLRM also
// without dense features, DCN-v2 also with low-rank cross layers. MoE's
// routing (top-2, capacity factor 1.25) is a step function of the gate, so
// a near-tie that rounding resolves differently on the two devices would
// move a whole expert's share; these inputs have none (the CPU model gives
// the same results with its inputs perturbed by 3e-6, ten times the
// devices' rounding differences).
const ZooCase kZooCases[] = {
    {"dlrm", 1},   {"dlrm", 7},     {"dlrm", 133},    {"dlrm", 9, 0},      {"deepfm", 1},
    {"deepfm", 7}, {"deepfm", 133}, {"wide_deep", 1}, {"wide_deep", 7},    {"wide_deep", 133},
    {"dcn_v2", 1}, {"dcn_v2", 7},   {"dcn_v2", 133},  {"dcn_v2", 9, 4, 3}, {"mmoe", 1},
    {"mmoe", 7},   {"mmoe", 133},   {"moe", 1},       {"moe", 7},          {"moe", 133}};

class CudaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "needs a CUDA device (none present)";
  }
};

class DenseModelCudaTest : public CudaModelTest, public ::testing::WithParamInterface<ZooCase> {};

// SGD keeps a parameter's difference proportional to its gradient's. (Adam's
// first steps move every weight by about the learning rate whatever the size
// of its gradient, so a gradient of nearly zero whose sign differs between
// the devices would move the weight by twice the learning rate: the CUDA
// optimizer itself is compared with the CPU's in ops_cuda_test.)
TEST_P(DenseModelCudaTest, TrainingStepsAgreeWithTheCpu) {
  const int64_t batch = GetParam().batch;
  ModelOptions options = Options(GetParam());
  // The whole batch as one range on the CPU, as on the GPU: MoE's routing and
  // balance loss compute over the rows they are given as one group
  // (rows_grouped), so the CPU's default, a range per thread, would route and
  // balance per range (on an H200's 16 cores, a batch of 7 in 7 groups of
  // one row) and give other gate gradients, correctly.
  options.cpu_row_shards = 1;
  auto cpu = NewDenseModel(options);
  options.device = Device::Cuda(0);
  auto gpu = NewDenseModel(options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(Device::Cuda(0), (*gpu)->device());

  // Initialised on the host and copied: the same bits.
  Result<std::vector<Parameter>> initial = (*gpu)->ParametersToHost();
  ASSERT_TRUE(initial.ok()) << initial.status();
  const std::vector<Parameter*> cpu_params = (*cpu)->parameters();
  ASSERT_EQ(cpu_params.size(), initial->size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    EXPECT_EQ(Device::Cuda(0), (*gpu)->parameters()[i]->value.device());
    EXPECT_TRUE(SameBits(cpu_params[i]->value, (*initial)[i].value)) << ParameterName(**cpu, i);
  }

  ops::DenseOptimizerOptions sgd;
  sgd.type = ops::DenseOptimizer::kSgd;
  sgd.learning_rate = 0.05f;
  ASSERT_TRUE((*cpu)->InitOptimizer(sgd).ok());
  ASSERT_TRUE((*gpu)->InitOptimizer(sgd).ok());
  const int64_t pooled_width = int64_t{options.num_slots} * options.embedding_dim;
  const int64_t outputs = batch * options.num_tasks;
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    RandomStream random(static_cast<uint64_t>(step * 1000 + batch));
    const Tensor dense = RandomHost({batch, options.num_dense}, random, 1.0);
    const Tensor pooled = RandomHost({batch, pooled_width}, random, 0.5);
    Tensor labels = Tensor::Empty({outputs});
    for (int64_t i = 0; i < outputs; ++i) {
      labels.data<float>()[i] = static_cast<float>(random.Uniform(0.0, 1.0) < 0.3);
    }
    Tensor cpu_logits, gpu_logits;
    ASSERT_TRUE((*cpu)->Forward(dense, pooled, &cpu_logits).ok());
    const Status forward = (*gpu)->Forward(dense, pooled, &gpu_logits);
    ASSERT_TRUE(forward.ok()) << forward;
    ASSERT_TRUE(gpu_logits.device().is_cpu());
    ASSERT_EQ(cpu_logits.shape(), gpu_logits.shape());
    ExpectClose(cpu_logits, gpu_logits, "logits");

    // Both backwards start from the CPU's dlogits, so that dpooled compares
    // the backwards alone.
    Tensor dlogits = Tensor::Empty({batch, options.num_tasks});
    Tensor flat_dlogits = dlogits.Reshape({outputs});
    ASSERT_TRUE(
        ops::SigmoidCrossEntropyWithLogits(cpu_logits.Reshape({outputs}), labels, &flat_dlogits)
            .ok());
    Tensor cpu_dpooled = Tensor::Empty({batch, pooled_width});
    Tensor gpu_dpooled = Tensor::Empty({batch, pooled_width});
    ASSERT_TRUE((*cpu)->Backward(dlogits, &cpu_dpooled).ok());
    const Status backward = (*gpu)->Backward(dlogits, &gpu_dpooled);
    ASSERT_TRUE(backward.ok()) << backward;
    ExpectClose(cpu_dpooled, gpu_dpooled, "dpooled");

    ASSERT_TRUE((*cpu)->OptimizerStep(sgd, step).ok());
    ASSERT_TRUE((*gpu)->OptimizerStep(sgd, step).ok());
    Result<std::vector<Parameter>> trained = (*gpu)->ParametersToHost();
    ASSERT_TRUE(trained.ok()) << trained.status();
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      ExpectClose(cpu_params[i]->value, (*trained)[i].value, ParameterName(**cpu, i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, DenseModelCudaTest, ::testing::ValuesIn(kZooCases), [](const auto& info) {
      return std::string(info.param.model) + "_batch" + std::to_string(info.param.batch) +
             "_dense" + std::to_string(info.param.num_dense) +
             (info.param.cross_rank ? "_rank" + std::to_string(info.param.cross_rank) : "");
    });

TEST(DenseModelCudaCasesTest, CoverEveryModelOfTheZoo) {
  for (const std::string& name : ModelNames()) {
    int cases = 0;
    for (const ZooCase& c : kZooCases) cases += name == c.model;
    EXPECT_GE(cases, 3) << name;
  }
}

// What a checkpoint does: host copies of a model on the device, with Adam's
// state, restored into another model on the device and into one on the CPU.
TEST_F(CudaModelTest, ParametersAndOptimizerStateCopyThroughTheHost) {
  ModelOptions options = Options(ZooCase{"dcn_v2", 6});
  options.device = Device::Cuda(0);
  auto trained = NewDenseModel(options);
  options.seed = 12;
  auto restored = NewDenseModel(options);
  options.device = Device::Cpu();
  auto on_cpu = NewDenseModel(options);
  ASSERT_TRUE(trained.ok() && restored.ok() && on_cpu.ok());
  const ops::DenseOptimizerOptions adam;
  for (DenseModel* model : {trained->get(), restored->get(), on_cpu->get()}) {
    ASSERT_TRUE(model->InitOptimizer(adam).ok());
  }
  RandomStream random(5);
  const Tensor dense = RandomHost({6, options.num_dense}, random, 1.0);
  const Tensor pooled =
      RandomHost({6, int64_t{options.num_slots} * options.embedding_dim}, random, 0.5);
  const Tensor dlogits = RandomHost({6, 1}, random, 0.1);
  Tensor logits, dpooled = Tensor::Empty(pooled.shape());
  ASSERT_TRUE((*trained)->Forward(dense, pooled, &logits).ok());
  ASSERT_TRUE((*trained)->Backward(dlogits, &dpooled).ok());
  ASSERT_TRUE((*trained)->OptimizerStep(adam, 1).ok());

  Result<std::vector<Parameter>> host = (*trained)->ParametersToHost();
  ASSERT_TRUE(host.ok()) << host.status();
  for (const Parameter& p : *host) {
    EXPECT_TRUE(p.value.device().is_cpu());
    EXPECT_TRUE(p.slot.first_moment.defined() && p.slot.first_moment.device().is_cpu());
    EXPECT_TRUE(p.slot.second_moment.defined() && p.slot.second_moment.device().is_cpu());
  }
  ASSERT_TRUE((*restored)->ParametersFromHost(*host).ok());
  ASSERT_TRUE((*on_cpu)->ParametersFromHost(*host).ok());
  Result<std::vector<Parameter>> again = (*restored)->ParametersToHost();
  ASSERT_TRUE(again.ok()) << again.status();
  for (size_t i = 0; i < host->size(); ++i) {
    EXPECT_TRUE(SameBits((*host)[i].value, (*again)[i].value)) << i;
    EXPECT_TRUE(SameBits((*host)[i].slot.first_moment, (*again)[i].slot.first_moment)) << i;
    EXPECT_TRUE(SameBits((*host)[i].slot.second_moment, (*again)[i].slot.second_moment)) << i;
  }
  // The same parameters on the same device give the same bits.
  Tensor trained_logits, restored_logits, cpu_logits;
  ASSERT_TRUE((*trained)->Forward(dense, pooled, &trained_logits).ok());
  const Tensor first = trained_logits.Clone();
  ASSERT_TRUE((*restored)->Forward(dense, pooled, &restored_logits).ok());
  EXPECT_TRUE(SameBits(first, restored_logits));
  ASSERT_TRUE((*on_cpu)->Forward(dense, pooled, &cpu_logits).ok());
  ExpectClose(cpu_logits, restored_logits, "logits on the CPU");
}

// The host tensors a GPU model copies from and to (the training step's
// pooled, dense and dpooled) are page-locked, and their blocks are reused.
TEST_F(CudaModelTest, HostTensorsForTheDeviceArePageLocked) {
  ModelOptions options = Options(ZooCase{"dlrm", 4});
  options.device = Device::Cuda(0);
  auto model = NewDenseModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  Allocator* allocator = (*model)->host_allocator();
  EXPECT_STREQ("caching_cuda_pinned", allocator->name());
  Result<Tensor> host = Tensor::Allocate({256, 1024}, DType::kF32, Device::Cpu(), allocator);
  ASSERT_TRUE(host.ok()) << host.status();
  void* const block = host->raw_data();
  *host = Tensor();
  Result<Tensor> again = Tensor::Allocate({256, 1024}, DType::kF32, Device::Cpu(), allocator);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(block, again->raw_data());
  options.device = Device::Cpu();
  auto on_cpu = NewDenseModel(options);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_EQ(CpuAllocator(), (*on_cpu)->host_allocator());
}

TEST_F(CudaModelTest, InputsOnTheDeviceAreRefusedNamingThem) {
  ModelOptions options = Options(ZooCase{"wide_deep", 2});
  options.device = Device::Cuda(0);
  auto model = NewDenseModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  Result<Tensor> on_device = Tensor::Allocate({2, options.num_dense}, DType::kF32, Device::Cuda(0));
  ASSERT_TRUE(on_device.ok());
  Tensor logits;
  const Status status = (*model)->Forward(
      *on_device, Tensor::Zeros({2, int64_t{options.num_slots} * options.embedding_dim}), &logits);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("dense"));
}

}  // namespace
}  // namespace ember::engine
