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
#include "pipeline/pipeline_parallel.h"
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
  PipelineParallelOptions options;
  options.ranks = p;
  options.virtual_stages = v;
  Result<scheduler::PipelinePartition> partition =
      PartitionForPipeline(g, options, kBatch);
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
// over the micro-batches in order (they may differ in size: a short last
// batch), then the optimizer.
std::map<std::string, std::vector<float>>
TrainUnsplit(const ops::Graph &g,
                  const std::vector<std::vector<MicroBatchData>> &steps) {
  auto executor = *ops::GraphExecutor::Create(&g, kSeed);
  std::vector<Tensor> &params = executor->parameters();
  std::vector<ops::DenseOptimizerSlot> slots;
  for (const Tensor &p : params)
    slots.push_back(ops::NewDenseOptimizerSlot(Adam(), p));
  for (size_t s = 0; s < steps.size(); ++s) {
    int64_t examples = 0;
    for (const MicroBatchData &mb : steps[s])
      examples += mb.labels.numel();
    std::vector<std::vector<float>> sums;
    for (const Tensor &p : params)
      sums.emplace_back(p.numel(), 0.0f);
    for (const MicroBatchData &mb : steps[s]) {
      CHECK(executor->Forward(mb.inputs).ok());
      const Tensor &logits = executor->output(0);
      Tensor dlogits = Tensor::Empty(logits.shape());
      CHECK(ops::SigmoidCrossEntropyWithLogits(
                logits, mb.labels.Reshape(logits.shape()), &dlogits, examples)
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
    Result<std::vector<ChunkParameter>> host = work[r]->ParametersToHost();
    CHECK(host.ok()) << host.status();
    for (const ChunkParameter &param : *host) {
      named[param.name] = std::vector<float>(
          param.value.data<float>(),
          param.value.data<float>() + param.value.numel());
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
                                      {"interleaved", 3, 2, 3},
                                      {"zb-h1", 2, 1, 4},
                                      {"zb-h1", 3, 1, 2},
                                      {"zb-h1", 3, 1, 5}}) {
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
  Result<std::vector<GraphChunk>> graphs = CutGraph(*g, partition);
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  ASSERT_EQ(4u, graphs->size());
  size_t nodes = 0;
  for (size_t c = 0; c < graphs->size(); ++c) {
    const ops::Graph &sub = *(*graphs)[c].graph;
    nodes += sub.nodes().size();
    EXPECT_EQ(g->nodes()[partition.chunks[c].first_node].name,
              sub.nodes().front().name);
    ASSERT_EQ(1u, sub.outputs().size());
    if (c > 0) {
      const ops::Graph &before = *(*graphs)[c - 1].graph;
      ASSERT_EQ(1u, sub.inputs().size());
      EXPECT_EQ(before.values()[before.outputs()[0]].name,
                sub.values()[sub.inputs()[0]].name);
    }
  }
  EXPECT_EQ(g->nodes().size(), nodes);
  EXPECT_EQ(g->parameter_count(), [&] {
    int64_t n = 0;
    for (const auto &sub : *graphs)
      n += sub.graph->parameter_count();
    return n;
  }());
}

// x -> fc0 = a -> fc1 = b -> fc2 = c; s = a + c; t = s + x; out = fc3(t).
// Cut as {fc0}, {fc1}, {fc2, s}, {t, out}, "a" passes through chunk 1 and
// the graph input "x" through chunks 1 and 2.
std::unique_ptr<ops::Graph> SkipGraph() {
  auto g = std::make_unique<ops::Graph>(&ops::DefaultOpRegistry());
  const int x = *g->AddInput("x", {4});
  const int pooled = *g->AddInput("pooled", {4});
  auto fc = [&](const std::string &name, int in, int64_t out) {
    const int w = *g->AddParameter(name + ".w", {out, 4},
                                   ops::Initializer::kHeUniform, 4);
    const int b = *g->AddParameter(name + ".b", {out}, ops::Initializer::kZeros);
    return (*g->AddNode(name, "fully_connected", {in, w, b}))[0];
  };
  const int a = (*g->AddNode("mix", "add", {x, pooled}))[0];
  const int a1 = fc("fc0", a, 4);
  const int b = fc("fc1", a1, 4);
  const int c = fc("fc2", b, 4);
  const int sum = (*g->AddNode("s", "add", {a1, c}))[0];
  const int t = (*g->AddNode("t", "add", {sum, x}))[0];
  CHECK(g->MarkOutput(fc("fc3", t, 1)).ok());
  return g;
}

scheduler::PipelinePartition SkipPartition() {
  scheduler::PipelinePartition partition;
  partition.chunks = {{0, 2}, {2, 3}, {3, 5}, {5, 7}};
  return partition;
}

std::vector<std::vector<MicroBatchData>>
SkipSteps(int steps, const std::vector<int64_t> &sizes) {
  RandomStream random(kSeed, 5);
  std::vector<std::vector<MicroBatchData>> data(static_cast<size_t>(steps));
  for (auto &step : data) {
    for (int64_t b : sizes) {
      MicroBatchData d;
      for (int input = 0; input < 2; ++input) {
        std::vector<float> x;
        for (int64_t i = 0; i < b * 4; ++i)
          x.push_back(float(random.Uniform(-1, 1)));
        d.inputs.push_back(Tensor::FromVector(x, {b, 4}));
      }
      std::vector<float> y;
      for (int64_t i = 0; i < b; ++i)
        y.push_back(random.Uniform(0, 1) < 0.4 ? 1.f : 0.f);
      d.labels = Tensor::FromVector(y, {b});
      step.push_back(std::move(d));
    }
  }
  return data;
}

TEST(GraphChunkWorkTest, CarriesValuesThatPassThroughAChunk) {
  const auto g = SkipGraph();
  Result<std::vector<GraphChunk>> cut = CutGraph(*g, SkipPartition());
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_EQ(4u, cut->size());
  auto names = [&](const std::vector<int> &ids) {
    std::vector<std::string> n;
    for (int v : ids)
      n.push_back(g->values()[v].name);
    return n;
  };
  using ::testing::ElementsAre;
  EXPECT_THAT(names((*cut)[0].carried_in), ElementsAre("x", "pooled"));
  EXPECT_THAT(names((*cut)[1].carried_in), ElementsAre("x", "fc0"));
  EXPECT_THAT(names((*cut)[2].carried_in), ElementsAre("x", "fc0", "fc1"));
  EXPECT_THAT(names((*cut)[3].carried_in), ElementsAre("x", "s"));
  // Chunk 1 reads fc0 and passes x and fc0 on, after its own fc1, beside
  // fc1.
  const ops::Graph &chunk1 = *(*cut)[1].graph;
  EXPECT_EQ(2u, chunk1.inputs().size());
  std::vector<std::string> nodes, outputs;
  for (const ops::GraphNode &node : chunk1.nodes())
    nodes.push_back(node.name);
  for (int v : chunk1.outputs())
    outputs.push_back(chunk1.nodes()[chunk1.values()[v].producer].name);
  EXPECT_THAT(nodes, ElementsAre("fc1", "pass.x", "pass.fc0"));
  EXPECT_THAT(outputs, ElementsAre("pass.x", "pass.fc0", "fc1"));
  EXPECT_EQ(2u, (*cut)[0].carried_out.size());
  EXPECT_TRUE((*cut)[3].carried_out.empty());
  scheduler::PipelinePartition partition;
  partition.chunks = {{0, 2}, {2, 3}};
  EXPECT_THAT(CutGraph(*g, partition).status().message(),
              HasSubstr("covers 3 of 7 nodes"));
  partition.chunks = {{0, 6}, {6, 7}};
  ASSERT_TRUE(CutGraph(*g, partition).ok());
}

TEST(GraphChunkWorkTest, SkipConnectionsAndUnequalMicroBatchesTrainTheUnsplitModel) {
  const auto g = SkipGraph();
  const std::vector<int64_t> sizes = {8, 5, 3, 8};
  const auto steps = SkipSteps(3, sizes);
  const auto reference = TrainUnsplit(*g, steps);
  for (const auto &[kind, p, v] : {std::tuple{"gpipe", 4, 1},
                                   {"gpipe", 2, 2},
                                   {"1f1b", 4, 1},
                                   {"interleaved", 2, 2},
                                   {"interleaved", 1, 4},
                                   {"zb-h1", 4, 1}}) {
    const ScheduleShape shape{p, v, static_cast<int>(sizes.size())};
    Result<Schedule> schedule = BuiltinSchedules().Make(kind, shape);
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    GraphChunkWorkOptions options;
    options.seed = kSeed;
    options.optimizer = Adam();
    std::vector<std::unique_ptr<GraphChunkWork>> work;
    for (int r = 0; r < p; ++r) {
      Result<std::unique_ptr<GraphChunkWork>> w =
          GraphChunkWork::Create(*g, SkipPartition(), shape, r, options);
      ASSERT_TRUE(w.ok()) << w.status();
      (*w)->set_micro_batch_sizes(sizes);
      (*w)->set_loss_mean_over(24);
      work.push_back(std::move(*w));
    }
    CommunicatorOptions comm_options;
    comm_options.timeout_seconds = 60;
    auto comms = *NewInProcessCommunicators(p, comm_options);
    std::vector<Status> statuses(static_cast<size_t>(p));
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r) {
      threads.emplace_back([&, r] {
        for (size_t s = 0; s < steps.size() && statuses[r].ok(); ++s) {
          work[r]->set_micro_batches(&steps[s]);
          statuses[r] = RunRankSchedule(*schedule, r, *work[r], comms[r].get());
        }
      });
    }
    for (std::thread &t : threads)
      t.join();
    std::map<std::string, std::vector<float>> pipelined;
    for (int r = 0; r < p; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
      Result<std::vector<ChunkParameter>> host = work[r]->ParametersToHost();
    CHECK(host.ok()) << host.status();
    for (const ChunkParameter &param : *host) {
        pipelined[param.name] = std::vector<float>(
            param.value.data<float>(),
            param.value.data<float>() + param.value.numel());
      }
    }
    ASSERT_EQ(reference.size(), pipelined.size());
    for (const auto &[name, values] : reference) {
      const std::vector<float> &got = pipelined.at(name);
      ASSERT_EQ(values.size(), got.size());
      for (size_t k = 0; k < values.size(); ++k) {
        EXPECT_EQ(values[k], got[k])
            << kind << " " << ToString(shape) << " " << name << "[" << k << "]";
      }
    }
  }
}

TEST(GraphChunkWorkTest, KeepsTheLogitsAndTheGradientOfTheGraphInputs) {
  const auto g = SkipGraph();
  const auto steps = SkipSteps(1, {6, 6});
  // The unsplit model's logits and input gradients, before any update.
  auto executor = *ops::GraphExecutor::Create(g.get(), kSeed);
  const ScheduleShape shape{1, 4, 2};
  GraphChunkWorkOptions options;
  options.seed = kSeed;
  options.micro_batch_size = 6;
  options.loss_mean_over = 12;
  auto work = *GraphChunkWork::Create(*g, SkipPartition(), shape, 0, options);
  work->set_micro_batches(&steps[0]);
  const Schedule schedule = *BuiltinSchedules().Make("gpipe", shape);
  ASSERT_TRUE(RunRankSchedule(schedule, 0, *work, nullptr).ok());
  for (int mb = 0; mb < 2; ++mb) {
    const MicroBatchData &data = steps[0][static_cast<size_t>(mb)];
    ASSERT_TRUE(executor->Forward(data.inputs).ok());
    const Tensor logits = executor->output(0).Clone();
    Tensor dlogits = Tensor::Empty(logits.shape());
    ASSERT_TRUE(ops::SigmoidCrossEntropyWithLogits(
                    logits, data.labels.Reshape(logits.shape()), &dlogits, 12)
                    .ok());
    Tensor dx = Tensor::Empty({6, 4}), dpooled = Tensor::Empty({6, 4});
    ASSERT_TRUE(executor->Backward({dlogits}, {&dx, &dpooled}).ok());
    Result<Tensor> got_logits = work->Logits(mb);
    ASSERT_TRUE(got_logits.ok()) << got_logits.status();
    for (int64_t i = 0; i < 6; ++i) {
      EXPECT_EQ(logits.data<float>()[i], got_logits->data<float>()[i]);
    }
    for (int input = 0; input < 2; ++input) {
      Result<Tensor> grad = work->InputGradient(mb, input);
      ASSERT_TRUE(grad.ok()) << grad.status();
      const Tensor &want = input == 0 ? dx : dpooled;
      for (int64_t i = 0; i < want.numel(); ++i) {
        EXPECT_EQ(want.data<float>()[i], grad->data<float>()[i])
            << "input " << input << " [" << i << "]";
      }
    }
  }
  EXPECT_EQ(StatusCode::kFailedPrecondition, work->Logits(2).status().code());
  EXPECT_EQ(StatusCode::kFailedPrecondition,
            work->InputGradient(0, 2).status().code());
}

TEST(GraphChunkWorkTest, ParametersGoToTheHostAndBackWithTheirOptimizerState) {
  const auto g = SkipGraph();
  const ScheduleShape shape{2, 2, 2};
  GraphChunkWorkOptions options;
  options.seed = kSeed;
  options.optimizer = Adam();
  auto work = *GraphChunkWork::Create(*g, SkipPartition(), shape, 1, options);
  Result<std::vector<ChunkParameter>> host = work->ParametersToHost();
  ASSERT_TRUE(host.ok()) << host.status();
  // Rank 1 holds chunks 1 and 3: fc1 and fc3, each a weight and a bias.
  ASSERT_EQ(4u, host->size());
  EXPECT_EQ("fc1.w", (*host)[0].name);
  EXPECT_EQ("fc3.b", (*host)[3].name);
  ASSERT_TRUE((*host)[0].slot.first_moment.defined()); // Adam's m and v.
  (*host)[0].value.data<float>()[2] = 7.5f;
  (*host)[0].slot.second_moment.data<float>()[1] = 0.25f;
  // A copy: the chunk's own parameter is unchanged until set.
  EXPECT_NE(7.5f, (*work->ParametersToHost())[0].value.data<float>()[2]);
  ASSERT_TRUE(work->ParametersFromHost(*host).ok());
  Result<std::vector<ChunkParameter>> again = work->ParametersToHost();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(7.5f, (*again)[0].value.data<float>()[2]);
  EXPECT_EQ(0.25f, (*again)[0].slot.second_moment.data<float>()[1]);
  // A wrong name or size changes nothing.
  std::vector<ChunkParameter> renamed = *again;
  renamed[1].name = "fc9.b";
  renamed[0].value = Tensor::Zeros(renamed[0].value.shape());
  EXPECT_THAT(work->ParametersFromHost(renamed).message(), HasSubstr("\"fc1.b\", given fc9.b"));
  EXPECT_EQ(7.5f, (*work->ParametersToHost())[0].value.data<float>()[2]);
  std::vector<ChunkParameter> short_list(again->begin(), again->end() - 1);
  EXPECT_EQ(StatusCode::kInvalidArgument, work->ParametersFromHost(short_list).code());
}

} // namespace
} // namespace ember::pipeline
