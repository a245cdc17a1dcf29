#include "pipeline/graph_chunk_work.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/in_process_communicator.h"
#include "core/random.h"
#include "ops/dense_ops.h"
#include "ops/graph_executor.h"
#include "ops/op_registry.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_checker.h"
#include "scheduler/cost_model.h"
#include "scheduler/pipeline_partition.h"

namespace ember::pipeline {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBatch = 8; // per micro-batch
constexpr uint64_t kSeed = 7;

// A DLRM-like top: concat(dense [4], pooled [12]) -> MLP 32-24-16-16-8-1,
// ReLU between layers: 7 nodes of uneven cost.
std::unique_ptr<ops::Graph> TopMlp() {
  auto g = std::make_unique<ops::Graph>(&ops::DefaultOpRegistry());
  const int dense = *g->AddInput("dense", {4});
  const int pooled = *g->AddInput("pooled", {12});
  int x = (*g->AddNode("x0", "concat", {dense, pooled}))[0];
  int64_t in = 16;
  const std::vector<int64_t> widths = {32, 24, 16, 16, 8, 1};
  for (size_t l = 0; l < widths.size(); ++l) {
    const std::string name = "top." + std::to_string(l);
    const int w = *g->AddParameter(name + ".weight", {widths[l], in},
                                   ops::Initializer::kHeUniform, in);
    const int b =
        *g->AddParameter(name + ".bias", {widths[l]}, ops::Initializer::kZeros);
    const bool relu = l + 1 < widths.size();
    x = (*g->AddNode(name, "fully_connected", {x, w, b},
                     ops::OpAttrs().Set("activation", relu ? 1 : 0)))[0];
    in = widths[l];
  }
  CHECK(g->MarkOutput(x).ok());
  return g;
}

scheduler::PipelinePartition Partition(const ops::Graph &g, int p, int v) {
  scheduler::ResourceGraph resources;
  resources.hosts.push_back({"h", {}});
  scheduler::DeviceNode cpu;
  cpu.cores = 4;
  cpu.rates.gemm_gflops_per_core = 50;
  cpu.rates.gemm_gflops = 200;
  cpu.rates.memory_gbps = 20;
  resources.AddDevice(0, scheduler::DeviceKind::kCpu, cpu);
  const scheduler::CostModel cost(&resources);
  scheduler::PipelinePartitionOptions options;
  options.ranks = p;
  options.virtual_stages = v;
  options.micro_batch_size = kBatch;
  Result<scheduler::PipelinePartition> partition =
      scheduler::PartitionDenseGraph(g, cost, options);
  CHECK(partition.ok()) << partition.status();
  return *partition;
}

std::vector<std::vector<MicroBatchData>> Steps(int steps, int m) {
  RandomStream random(kSeed, 99);
  std::vector<std::vector<MicroBatchData>> data(static_cast<size_t>(steps));
  for (auto &step : data) {
    for (int mb = 0; mb < m; ++mb) {
      MicroBatchData d;
      for (int64_t width : {4, 12}) {
        std::vector<float> x;
        for (int64_t i = 0; i < kBatch * width; ++i)
          x.push_back(float(random.Uniform(-1, 1)));
        d.inputs.push_back(Tensor::FromVector(x, {kBatch, width}));
      }
      std::vector<float> y;
      for (int64_t i = 0; i < kBatch; ++i)
        y.push_back(random.Uniform(0, 1) < 0.4 ? 1.f : 0.f);
      d.labels = Tensor::FromVector(y, {kBatch});
      step.push_back(std::move(d));
    }
  }
  return data;
}

ops::DenseOptimizerOptions Adam() {
  ops::DenseOptimizerOptions o;
  o.learning_rate = 0.01f;
  return o;
}

// The unsplit model: one executor over the whole graph, gradients summed
// over the micro-batches in order, then the optimizer.
std::map<std::string, std::vector<float>>
TrainUnsplit(const ops::Graph &g,
             const std::vector<std::vector<MicroBatchData>> &steps) {
  auto executor = *ops::GraphExecutor::Create(&g, kSeed);
  std::vector<Tensor> &params = executor->parameters();
  std::vector<ops::DenseOptimizerSlot> slots;
  for (const Tensor &p : params)
    slots.push_back(ops::NewDenseOptimizerSlot(Adam(), p));
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<std::vector<float>> sums;
    for (const Tensor &p : params)
      sums.emplace_back(p.numel(), 0.0f);
    for (const MicroBatchData &mb : steps[s]) {
      CHECK(executor->Forward(mb.inputs).ok());
      const Tensor &logits = executor->output(0);
      Tensor dlogits = Tensor::Empty(logits.shape());
      CHECK(ops::SigmoidCrossEntropyWithLogits(
                logits, mb.labels.Reshape(logits.shape()), &dlogits,
                kBatch * static_cast<int64_t>(steps[s].size()))
                .ok());
      CHECK(executor->Backward({dlogits}, {}).ok());
      for (size_t i = 0; i < params.size(); ++i) {
        const float *grad = executor->gradients()[i].data<float>();
        for (size_t k = 0; k < sums[i].size(); ++k)
          sums[i][k] += grad[k];
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor grad = Tensor::FromVector(sums[i], params[i].shape());
      CHECK(ops::DenseOptimizerStep(Adam(), static_cast<int64_t>(s) + 1, grad,
                                    &params[i], &slots[i])
                .ok());
    }
  }
  std::map<std::string, std::vector<float>> named;
  for (size_t i = 0; i < params.size(); ++i) {
    const float *v = params[i].data<float>();
    named[g.values()[g.parameters()[i]].name] =
        std::vector<float>(v, v + params[i].numel());
  }
  return named;
}

// Every rank a thread with its GraphChunkWork; returns the parameters of all
// ranks by name.
std::map<std::string, std::vector<float>>
TrainPipelined(const ops::Graph &g, const Schedule &schedule,
               const std::vector<std::vector<MicroBatchData>> &steps) {
  const ScheduleShape shape = schedule.shape;
  const scheduler::PipelinePartition partition =
      Partition(g, shape.ranks, shape.virtual_stages);
  GraphChunkWorkOptions options;
  options.micro_batch_size = kBatch;
  options.seed = kSeed;
  options.optimizer = Adam();
  options.loss_mean_over = kBatch * shape.micro_batches;
  std::vector<std::unique_ptr<GraphChunkWork>> work;
  for (int r = 0; r < shape.ranks; ++r) {
    Result<std::unique_ptr<GraphChunkWork>> w =
        GraphChunkWork::Create(g, partition, shape, r, options);
    CHECK(w.ok()) << w.status();
    work.push_back(std::move(*w));
  }
  CommunicatorOptions comm_options;
  comm_options.timeout_seconds =
      60; // a hang fails the test instead of stalling it
  auto comms = *NewInProcessCommunicators(shape.ranks, comm_options);
  std::vector<Status> statuses(static_cast<size_t>(shape.ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.ranks; ++r) {
    threads.emplace_back([&, r] {
      for (size_t s = 0; s < steps.size() && statuses[r].ok(); ++s) {
        work[r]->set_micro_batches(&steps[s]);
        statuses[r] = RunRankSchedule(schedule, r, *work[r], comms[r].get());
      }
    });
  }
  for (std::thread &t : threads)
    t.join();
  std::map<std::string, std::vector<float>> named;
  for (int r = 0; r < shape.ranks; ++r) {
    EXPECT_TRUE(statuses[r].ok()) << statuses[r];
    for (const auto &[name, t] : work[r]->parameters()) {
      named[name] =
          std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    }
  }
  return named;
}

TEST(GraphChunkWorkTest,
     PipelinedMlpEqualsUnsplitGradientAccumulationBitForBit) {
  const auto g = TopMlp();
  const int kSteps = 2;
  for (const auto &[kind, p, v, m] : {std::tuple{"gpipe", 1, 1, 2},
                                      {"gpipe", 2, 1, 3},
                                      {"gpipe", 2, 2, 3},
                                      {"1f1b", 2, 1, 4},
                                      {"1f1b", 3, 1, 2},
                                      {"interleaved", 2, 2, 4},
                                      {"interleaved", 2, 3, 2},
                                      {"interleaved", 3, 2, 3}}) {
    Result<Schedule> schedule = BuiltinSchedules().Make(kind, {p, v, m});
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    ASSERT_TRUE(CheckSchedule(*schedule).ok());
    const auto steps = Steps(kSteps, m);
    const auto reference = TrainUnsplit(*g, steps);
    const auto pipelined = TrainPipelined(*g, *schedule, steps);
    ASSERT_EQ(reference.size(), pipelined.size());
    for (const auto &[name, values] : reference) {
      EXPECT_EQ(values, pipelined.at(name))
          << kind << " " << ToString(schedule->shape) << " " << name;
    }
  }
}

TEST(GraphChunkWorkTest, CutsAGraphIntoChunksReadingTheirPredecessorsOutputs) {
  const auto g = TopMlp();
  const scheduler::PipelinePartition partition = Partition(*g, 2, 2);
  Result<std::vector<std::unique_ptr<ops::Graph>>> graphs =
      CutGraph(*g, partition);
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  ASSERT_EQ(4u, graphs->size());
  size_t nodes = 0;
  for (size_t c = 0; c < graphs->size(); ++c) {
    const ops::Graph &sub = *(*graphs)[c];
    nodes += sub.nodes().size();
    EXPECT_EQ(g->nodes()[partition.chunks[c].first_node].name,
              sub.nodes().front().name);
    ASSERT_EQ(1u, sub.outputs().size());
    if (c > 0) {
      const ops::Graph &before = *(*graphs)[c - 1];
      ASSERT_EQ(1u, sub.inputs().size());
      EXPECT_EQ(before.values()[before.outputs()[0]].name,
                sub.values()[sub.inputs()[0]].name);
    }
  }
  EXPECT_EQ(g->nodes().size(), nodes);
  EXPECT_EQ(g->parameter_count(), [&] {
    int64_t n = 0;
    for (const auto &sub : *graphs)
      n += sub->parameter_count();
    return n;
  }());
}

TEST(GraphChunkWorkTest, RejectsAValueThatWouldPassThroughAChunk) {
  // y = fc(fc(fc(x))) + x-level skip: "a" is read two chunks later.
  ops::Graph g(&ops::DefaultOpRegistry());
  const int x = *g.AddInput("x", {4});
  int prev = x;
  std::vector<int> made;
  for (int l = 0; l < 3; ++l) {
    const std::string name = "fc" + std::to_string(l);
    const int w =
        *g.AddParameter(name + ".w", {4, 4}, ops::Initializer::kHeUniform, 4);
    const int b = *g.AddParameter(name + ".b", {4}, ops::Initializer::kZeros);
    prev = (*g.AddNode(name, "fully_connected", {prev, w, b}))[0];
    made.push_back(prev);
  }
  const int sum = (*g.AddNode("skip", "add", {made[0], prev}))[0];
  ASSERT_TRUE(g.MarkOutput(sum).ok());
  scheduler::PipelinePartition partition;
  partition.chunks = {{0, 1}, {1, 2}, {2, 4}};
  Result<std::vector<std::unique_ptr<ops::Graph>>> graphs =
      CutGraph(g, partition);
  EXPECT_EQ(StatusCode::kUnimplemented, graphs.status().code());
  EXPECT_THAT(graphs.status().message(),
              HasSubstr("chunk 2 reads \"fc0\", made by chunk 0"));
  partition.chunks = {{0, 2}, {2, 3}};
  EXPECT_THAT(CutGraph(g, partition).status().message(),
              HasSubstr("covers 3 of 4 nodes"));
}

} // namespace
} // namespace ember::pipeline
