// The dense model split over pipeline ranks with its chunks on GPUs (issue
// 32): ranks as threads, the schedule's activations and gradients over
// in-process communicators (both ranks on cuda:0) or over NCCL (one GPU a
// rank, with two GPUs), against the same job with its chunks on the CPU. The
// GEMMs differ in rounding between the devices, so the comparison is within
// a tolerance. Each test skips, saying why, without the devices it needs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/in_process_communicator.h"
#include "core/nccl_communicator.h"
#include "engine/trainer.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "tests/engine/pipeline_ranks.h"
#include "tests/testing/temp_dir.h"

namespace ember::engine {
namespace {

using Comms = std::vector<std::unique_ptr<Communicator>>;

class PipelineParallelCudaTest : public test::TempDirTest {
 protected:
  void SetUp() override {
    test::TempDirTest::SetUp();
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "needs a CUDA device (none present)";
    io::SyntheticOptions synthetic;
    synthetic.rows = 96 * 6;
    synthetic.seed = 3;
    ASSERT_TRUE(io::WriteSyntheticCriteo(Path("train.tsv"), synthetic).ok());
    synthetic.rows = 300;
    synthetic.seed = 4;
    ASSERT_TRUE(io::WriteSyntheticCriteo(Path("test.tsv"), synthetic).ok());
    train_ = *io::ReadCriteoFiles({Path("train.tsv")}, io::CriteoReadOptions{});
    test_ = *io::ReadCriteoFiles({Path("test.tsv")}, io::CriteoReadOptions{});
  }

  TrainOptions Options(const Device& device) const {
    TrainOptions options;
    options.model.name = "dcn_v2";
    options.model.params.Set("cross_layers", 3);
    options.model.top_mlp = {48, 32};
    options.model.device = device;
    options.table.dim = 16;
    options.batch_size = 96;
    options.threads = 1;
    options.show_progress = false;
    options.pipeline.pipelined = false;
    options.pipeline_parallel.ranks = 2;
    options.pipeline_parallel.micro_batches = 4;
    options.pipeline_parallel.schedule = "1f1b";
    return options;
  }

  // Two ranks as threads over `stages` (and in-process commands); rank 0's
  // test predictions.
  Result<std::vector<float>> TrainTwoRanks(const std::function<Device(int)>& device_of,
                                           Comms stages) {
    Comms commands = *NewInProcessCommunicators(2, {.timeout_seconds = 120});
    std::vector<float> predictions;
    EMBER_RETURN_IF_ERROR(test::FirstFailure(test::RunPipelineRanks(
        stages, commands, [&](int r) { return Options(device_of(r)); }, train_.num_dense(),
        train_.num_slots(), [&](Trainer& trainer) -> Status {
          EMBER_RETURN_IF_ERROR(trainer.Fit(train_).status());
          EMBER_ASSIGN_OR_RETURN(predictions, trainer.Predict(test_));
          return Status::OK();
        })));
    return predictions;
  }

  static double MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || a.empty()) return 1e30;
    double most = 0;
    for (size_t i = 0; i < a.size(); ++i) most = std::max(most, double{std::fabs(a[i] - b[i])});
    return most;
  }

  io::Dataset train_, test_;
};

TEST_F(PipelineParallelCudaTest, ChunksOnTheGpuTrainTheModelOfChunksOnTheCpu) {
  Result<std::vector<float>> cpu = TrainTwoRanks([](int) { return Device::Cpu(); },
                                                 *NewInProcessCommunicators(2, {}));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  Result<std::vector<float>> gpu = TrainTwoRanks([](int) { return Device::Cuda(0); },
                                                 *NewInProcessCommunicators(2, {}));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_LT(MaxDifference(*cpu, *gpu), 2e-3);
}

TEST_F(PipelineParallelCudaTest, StagesOverNcclTrainTheModelOfStagesOverTheHost) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices (NCCL: one GPU a rank)";
  Result<std::vector<float>> host = TrainTwoRanks([](int r) { return Device::Cuda(r); },
                                                  *NewInProcessCommunicators(2, {}));
  ASSERT_TRUE(host.ok()) << host.status();
  Result<Comms> nccl = NewLocalNcclCommunicators({0, 1});
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  Result<std::vector<float>> over_nccl =
      TrainTwoRanks([](int r) { return Device::Cuda(r); }, std::move(*nccl));
  ASSERT_TRUE(over_nccl.ok()) << over_nccl.status();
  // The same kernels on the same devices: only the transport differs.
  EXPECT_EQ(*host, *over_nccl);
}

}  // namespace
}  // namespace ember::engine
