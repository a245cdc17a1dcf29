#include "pipeline/pipeline_parallel.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "pipeline/schedule_checker.h"
#include "scheduler/cost_model.h"
#include "scheduler/resource_graph.h"

namespace ember::pipeline {
namespace {

// Rank 0's commands, broadcast on the commands communicator as
// {command, batch examples, optimizer steps taken}.
enum Command : int64_t { kTrain = 1, kGather = 2, kScatter = 3, kFinish = 4 };
constexpr int kCommandWords = 3;
constexpr size_t kFingerprintWords = 4;  // GraphFingerprint's.

// Tags on the stages communicator beside the schedule's (MessageTag: below
// 2·m·chunks, which ValidatePipelineParallelOptions keeps under these).
constexpr int kLabelsTag = 32000, kLogitsTag = 32001, kLossTag = 32002, kParamsTag = 32003;

// What every rank's graph must agree on with rank 0's: nodes, parameters,
// and the elements per example of its inputs and output.
std::vector<int64_t> GraphFingerprint(const ops::Graph& graph) {
  int64_t inputs = 0;
  for (int v : graph.inputs()) inputs += graph.values()[v].elements();
  int64_t activations = 0;
  for (const ops::GraphValue& value : graph.values()) {
    if (value.kind == ops::ValueKind::kActivation) activations += value.elements();
  }
  return {static_cast<int64_t>(graph.nodes().size()), graph.parameter_count(), inputs,
          activations};
}

// Per parameter of `graph` (Graph::parameters() order): the rank holding
// the chunk whose nodes read it.
Result<std::vector<int>> ParameterRanks(const ops::Graph& graph,
                                        const scheduler::PipelinePartition& partition, int p) {
  std::vector<int> chunk_of(graph.values().size(), -1);
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    const int chunk = partition.ChunkOf(static_cast<int>(n));
    for (int v : graph.nodes()[n].inputs) {
      if (graph.values()[v].kind != ops::ValueKind::kParameter) continue;
      if (chunk_of[v] >= 0 && chunk_of[v] != chunk) {
        return Status::Unimplemented("pipeline chunks: parameter \"", graph.values()[v].name,
                                     "\" is read by chunks ", chunk_of[v], " and ", chunk,
                                     "; a parameter shared across chunks cannot be split yet");
      }
      chunk_of[v] = chunk;
    }
  }
  std::vector<int> ranks;
  for (int v : graph.parameters()) ranks.push_back(chunk_of[v] < 0 ? 0 : chunk_of[v] % p);
  return ranks;
}

// The tensors of one parameter as the pack below lays them out: its value,
// then the optimizer's moments it uses.
std::vector<Tensor*> PackedTensors(ChunkParameter& p) {
  std::vector<Tensor*> tensors = {&p.value};
  if (p.slot.first_moment.defined()) tensors.push_back(&p.slot.first_moment);
  if (p.slot.second_moment.defined()) tensors.push_back(&p.slot.second_moment);
  return tensors;
}

// Host copies of `rank`'s parameters of `work`: as the work lays them out
// (`host`), and in the graph's parameter order (`ordered`, sharing the
// storage of `host`).
struct RankParameters {
  std::vector<ChunkParameter> host;
  std::vector<ChunkParameter> ordered;
};

Result<RankParameters> RankParametersOf(GraphChunkWork& work, const ops::Graph& graph,
                                        const std::vector<int>& parameter_rank, int rank) {
  RankParameters parameters;
  EMBER_ASSIGN_OR_RETURN(parameters.host, work.ParametersToHost());
  std::map<std::string, const ChunkParameter*> by_name;
  for (const ChunkParameter& p : parameters.host) by_name[p.name] = &p;
  for (size_t i = 0; i < graph.parameters().size(); ++i) {
    if (parameter_rank[i] != rank) continue;
    const std::string& name = graph.values()[graph.parameters()[i]].name;
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      return Status::Internal("pipeline rank ", rank, " lacks parameter \"", name, "\"");
    }
    parameters.ordered.push_back(*it->second);  // Tensors share their storage.
  }
  return parameters;
}

std::vector<float> Pack(std::vector<ChunkParameter>& parameters) {
  std::vector<float> packed;
  for (ChunkParameter& p : parameters) {
    for (const Tensor* t : PackedTensors(p)) {
      packed.insert(packed.end(), t->data<float>(), t->data<float>() + t->numel());
    }
  }
  return packed;
}

int64_t PackedFloats(std::vector<ChunkParameter>& parameters) {
  int64_t n = 0;
  for (ChunkParameter& p : parameters) {
    for (const Tensor* t : PackedTensors(p)) n += t->numel();
  }
  return n;
}

void Unpack(const std::vector<float>& packed, std::vector<ChunkParameter>& parameters) {
  const float* at = packed.data();
  for (ChunkParameter& p : parameters) {
    for (Tensor* t : PackedTensors(p)) {
      std::memcpy(t->data<float>(), at, t->nbytes());
      at += t->numel();
    }
  }
}

// Rows [begin, end) of a [B, w] host tensor, copied.
Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  const int64_t width = t.numel() / std::max<int64_t>(1, t.shape()[0]);
  Tensor rows = Tensor::Empty({end - begin, width});
  std::memcpy(rows.data<float>(), t.data<float>() + begin * width,
              static_cast<size_t>((end - begin) * width) * sizeof(float));
  return rows;
}

// The last chunk's logits of the step's `micro_batches`, one after another
// into `out` ([B, tasks], host).
Status StepLogits(const GraphChunkWork& work, int micro_batches, Tensor* out) {
  float* at = out->data<float>();
  for (int i = 0; i < micro_batches; ++i) {
    EMBER_ASSIGN_OR_RETURN(const Tensor part, work.Logits(i));
    std::memcpy(at, part.data<float>(), part.nbytes());
    at += part.numel();
  }
  return Status::OK();
}

std::vector<int64_t> MicroBatchSizes(int64_t batch, int micro_batches) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < micro_batches; ++i) {
    sizes.push_back(batch / micro_batches + (i < batch % micro_batches ? 1 : 0));
  }
  return sizes;
}

// The schedule of a batch of `batch` examples, from `cache` (by micro-batch
// count) or made and checked.
Result<const Schedule*> ScheduleFor(const PipelineParallelOptions& options, int64_t batch,
                                    std::map<int, Schedule>* cache) {
  const int m = static_cast<int>(std::min<int64_t>(options.micro_batches, batch));
  auto it = cache->find(m);
  if (it == cache->end()) {
    const std::string kind = m == options.micro_batches ? ScheduleKindOf(options) : "gpipe";
    EMBER_ASSIGN_OR_RETURN(
        Schedule schedule,
        BuiltinSchedules().Make(kind, {options.ranks, options.virtual_stages, m,
                                       m == options.micro_batches ? options.group : 0}));
    EMBER_RETURN_IF_ERROR(CheckSchedule(schedule));
    it = cache->emplace(m, std::move(schedule)).first;
  }
  return &it->second;
}

Status Broadcast(Communicator* comm, std::vector<int64_t>* words, const char* what) {
  return comm->Broadcast(*words, 0).WithContext(what);
}

}  // namespace

std::string ScheduleKindOf(const PipelineParallelOptions& options) {
  if (!options.schedule.empty()) return options.schedule;
  return options.virtual_stages > 1 ? "interleaved" : "1f1b";
}

Status ValidatePipelineParallelOptions(const PipelineParallelOptions& options) {
  if (options.ranks < 1 || options.virtual_stages < 1 || options.micro_batches < 1) {
    return Status::InvalidArgument("pipeline parallelism: --pipeline_parallel=", options.ranks,
                                   " --virtual_stages=", options.virtual_stages,
                                   " --micro_batches=", options.micro_batches,
                                   ": each must be >= 1");
  }
  if (options.data != nullptr && options.ranks > 1) {
    return Status::InvalidArgument(
        "pipeline parallelism: --pipeline_parallel=", options.ranks,
        " with data ranks: data parallelism across pipelines is not supported yet");
  }
  const ScheduleShape shape{options.ranks, options.virtual_stages, options.micro_batches,
                            options.group};
  if (2 * int64_t{shape.micro_batches} * shape.chunks() > kLabelsTag) {
    return Status::InvalidArgument("pipeline parallelism: ", ToString(shape),
                                   " has too many micro-batches x chunks (at most ",
                                   kLabelsTag / 2, ")");
  }
  Result<Schedule> schedule = BuiltinSchedules().Make(ScheduleKindOf(options), shape);
  if (!schedule.ok()) {
    return schedule.status().WithContext("--pipeline_schedule=" + ScheduleKindOf(options));
  }
  if (options.ranks > 1) {
    for (const Communicator* comm : {options.stages, options.commands}) {
      if (comm == nullptr || comm->size() != options.ranks) {
        return Status::InvalidArgument("pipeline parallelism over ", options.ranks,
                                       " ranks needs communicators of ", options.ranks,
                                       " ranks (a job of that many ranks)");
      }
    }
    if (options.stages->sends_wait_for_receives()) {
      EMBER_RETURN_IF_ERROR(CheckRendezvous(*schedule).WithContext(
          "--pipeline_schedule=" + ScheduleKindOf(options) + " over a communicator whose sends wait"));
    }
  }
  return Status::OK();
}

Result<scheduler::PipelinePartition> PartitionForPipeline(const ops::Graph& graph,
                                                          const PipelineParallelOptions& options,
                                                          int64_t micro_batch_size) {
  // Nominal rates: the balance depends on the ops' relative costs only.
  scheduler::ResourceGraph resources;
  resources.hosts.push_back({"host", {}});
  scheduler::DeviceNode cpu;
  cpu.cores = 1;
  cpu.rates.gemm_gflops_per_core = 50;
  cpu.rates.gemm_gflops = 50;
  cpu.rates.memory_gbps = 10;
  resources.AddDevice(0, scheduler::DeviceKind::kCpu, cpu);
  const scheduler::CostModel cost(&resources);
  scheduler::PipelinePartitionOptions partition;
  partition.ranks = options.ranks;
  partition.virtual_stages = options.virtual_stages;
  partition.micro_batch_size = std::max<int64_t>(1, micro_batch_size);
  return scheduler::PartitionDenseGraph(graph, cost, partition);
}

Result<std::unique_ptr<PipelineDenseStage>> PipelineDenseStage::Create(
    const ops::Graph& graph, const scheduler::PipelinePartition& partition,
    const PipelineParallelOptions& options, uint64_t seed,
    const ops::DenseOptimizerOptions& optimizer, const Device& device) {
  EMBER_RETURN_IF_ERROR(ValidatePipelineParallelOptions(options));
  if (options.ranks > 1 && options.stages->rank() != 0) {
    return Status::InvalidArgument("pipeline parallelism: rank ", options.stages->rank(),
                                   " serves its stages (ServePipelineStages); rank 0 drives");
  }
  std::unique_ptr<PipelineDenseStage> stage(new PipelineDenseStage());
  stage->options_ = options;
  stage->graph_ = &graph;
  if (options.ranks > 1) {
    // The servers learn the partition (and check their graph against this
    // one's) before anything can fail here.
    std::vector<int64_t> words = GraphFingerprint(graph);
    for (const scheduler::PipelineChunk& chunk : partition.chunks) words.push_back(chunk.end_node);
    words.resize(kFingerprintWords + static_cast<size_t>(options.ranks * options.virtual_stages));
    EMBER_RETURN_IF_ERROR(Broadcast(options.commands, &words, "sending the pipeline's chunks"));
  }
  EMBER_ASSIGN_OR_RETURN(stage->parameter_rank_, ParameterRanks(graph, partition, options.ranks));
  GraphChunkWorkOptions work;
  work.device = device;
  work.seed = seed;
  work.optimizer = optimizer;
  EMBER_ASSIGN_OR_RETURN(
      stage->work_,
      GraphChunkWork::Create(graph, partition,
                             {options.ranks, options.virtual_stages, options.micro_batches,
                              options.group},
                             0,
                             work));
  stage->work_->set_gradient_reducer(options.data);
  return stage;
}

PipelineDenseStage::~PipelineDenseStage() {
  if (finished_ || options_.ranks == 1) return;
  const Status reason = Status::Cancelled("rank 0 stopped without finishing the pipeline");
  options_.stages->Abort(reason);
  options_.commands->Abort(reason);
}

Status PipelineDenseStage::SendCommand(int64_t command, int64_t batch, int64_t optimizer_steps) {
  if (options_.ranks == 1) return Status::OK();
  std::vector<int64_t> words = {command, batch, optimizer_steps};
  return Broadcast(options_.commands, &words, "sending rank 0's command");
}

Status PipelineDenseStage::Train(const Tensor& dense, const Tensor& pooled, const Tensor& labels,
                                 int64_t optimizer_steps, Tensor* logits, Tensor* dpooled,
                                 double* loss) {
  const int64_t batch = pooled.shape()[0];
  const int p = options_.ranks;
  Status status = [&]() -> Status {
    EMBER_RETURN_IF_ERROR(SendCommand(kTrain, batch, optimizer_steps));
    const int last = p - 1;  // The last chunk's rank: (p·v - 1) % p.
    if (last != 0) {
      EMBER_RETURN_IF_ERROR(options_.stages->Send(labels, last, kLabelsTag)
                                .WithContext("sending the labels to the last stage"));
    }
    EMBER_ASSIGN_OR_RETURN(const Schedule* schedule, ScheduleFor(options_, batch, &schedules_));
    const int m = schedule->shape.micro_batches;
    const std::vector<int64_t> sizes = MicroBatchSizes(batch, m);
    const bool has_dense = graph_->inputs().size() == 2;
    std::vector<MicroBatchData> micro_batches(static_cast<size_t>(m));
    int64_t begin = 0;
    for (int i = 0; i < m; ++i) {
      const int64_t end = begin + sizes[i];
      if (has_dense) micro_batches[i].inputs.push_back(Rows(dense, begin, end));
      micro_batches[i].inputs.push_back(Rows(pooled, begin, end));
      if (last == 0) micro_batches[i].labels = Rows(labels.Reshape({batch, labels.numel() / batch}), begin, end);
      begin = end;
    }
    work_->set_micro_batches(&micro_batches);
    work_->set_micro_batch_sizes(sizes);
    // With data ranks, the mean runs over every rank's outputs.
    int64_t mean_over = labels.numel();
    if (options_.data != nullptr) {
      std::vector<int64_t> all_outputs = {mean_over};
      EMBER_RETURN_IF_ERROR(options_.data->AllReduce(all_outputs, all_outputs)
                                .WithContext("summing the ranks' batch sizes"));
      mean_over = all_outputs[0];
    }
    work_->set_loss_mean_over(mean_over);
    work_->set_optimizer_steps(optimizer_steps);
    // The first step's allocations are not the schedule's.
    EMBER_RETURN_IF_ERROR(RunRankSchedule(*schedule, 0, *work_, options_.stages,
                                          steps_run_++ > 0 ? &times_ : nullptr));
    dirty_ = true;
    // The pooled embeddings' gradient, micro-batch after micro-batch.
    const int pooled_input = static_cast<int>(graph_->inputs().size()) - 1;
    float* out = dpooled->data<float>();
    for (int i = 0; i < m; ++i) {
      EMBER_ASSIGN_OR_RETURN(const Tensor grad, work_->InputGradient(i, pooled_input));
      std::memcpy(out, grad.data<float>(), grad.nbytes());
      out += grad.numel();
    }
    if (last == 0) {
      EMBER_RETURN_IF_ERROR(StepLogits(*work_, m, logits));
      // Reported: this batch's own mean (the loss is its share of the
      // ranks' mean).
      *loss = work_->step_loss() * static_cast<double>(mean_over) /
              static_cast<double>(labels.numel());
      return Status::OK();
    }
    EMBER_RETURN_IF_ERROR(options_.stages->Recv(*logits, last, kLogitsTag)
                              .WithContext("receiving the logits from the last stage"));
    std::vector<double> step_loss(1);
    EMBER_RETURN_IF_ERROR(options_.stages->Recv(step_loss, last, kLossTag)
                              .WithContext("receiving the loss from the last stage"));
    *loss = step_loss[0];
    return Status::OK();
  }();
  if (!status.ok() && p > 1) {
    options_.stages->Abort(status);
    options_.commands->Abort(status);
  }
  return status;
}

Status PipelineDenseStage::CopyParametersTo(ops::DenseModel& model) {
  if (!dirty_) return Status::OK();
  EMBER_RETURN_IF_ERROR(SendCommand(kGather, 0, 0));
  EMBER_ASSIGN_OR_RETURN(std::vector<ops::Parameter> host, model.ParametersToHost());
  std::vector<ChunkParameter> all;  // Views of `host`, in the graph's order.
  for (size_t i = 0; i < host.size(); ++i) {
    all.push_back({"", host[i].value, host[i].slot});
  }
  for (int r = 0; r < options_.ranks; ++r) {
    std::vector<ChunkParameter> mine;
    for (size_t i = 0; i < all.size(); ++i) {
      if (parameter_rank_[i] == r) mine.push_back(all[i]);
    }
    std::vector<float> packed;
    if (r == 0) {
      EMBER_ASSIGN_OR_RETURN(RankParameters own,
                             RankParametersOf(*work_, *graph_, parameter_rank_, 0));
      packed = Pack(own.ordered);
    } else {
      packed.resize(static_cast<size_t>(PackedFloats(mine)));
      EMBER_RETURN_IF_ERROR(
          options_.stages->Recv(packed, r, kParamsTag)
              .WithContext("receiving the parameters of pipeline rank " + std::to_string(r)));
    }
    Unpack(packed, mine);
  }
  EMBER_RETURN_IF_ERROR(model.ParametersFromHost(host));
  dirty_ = false;
  return Status::OK();
}

Status PipelineDenseStage::CopyParametersFrom(ops::DenseModel& model) {
  EMBER_RETURN_IF_ERROR(SendCommand(kScatter, 0, 0));
  EMBER_ASSIGN_OR_RETURN(std::vector<ops::Parameter> host, model.ParametersToHost());
  for (int r = 0; r < options_.ranks; ++r) {
    std::vector<ChunkParameter> mine;
    for (size_t i = 0; i < host.size(); ++i) {
      if (parameter_rank_[i] == r) mine.push_back({"", host[i].value, host[i].slot});
    }
    const std::vector<float> packed = Pack(mine);
    if (r == 0) {
      EMBER_ASSIGN_OR_RETURN(RankParameters own,
                             RankParametersOf(*work_, *graph_, parameter_rank_, 0));
      Unpack(packed, own.ordered);
      EMBER_RETURN_IF_ERROR(work_->ParametersFromHost(own.host));
    } else {
      EMBER_RETURN_IF_ERROR(
          options_.stages->Send(packed, r, kParamsTag)
              .WithContext("sending the parameters of pipeline rank " + std::to_string(r)));
    }
  }
  dirty_ = false;
  return Status::OK();
}

Status PipelineDenseStage::Finish() {
  if (finished_) return Status::OK();
  EMBER_RETURN_IF_ERROR(SendCommand(kFinish, 0, 0));
  finished_ = true;
  if (options_.ranks > 1 && times_.steps > 0) {
    LOG(INFO) << "pipeline rank 0 of " << options_.ranks << ", schedule "
              << ScheduleKindOf(options_) << ": " << ToString(times_);
  }
  return Status::OK();
}

Status ServePipelineStages(const ops::Graph& graph, const PipelineParallelOptions& options,
                           uint64_t seed, const ops::DenseOptimizerOptions& optimizer,
                           const Device& device) {
  EMBER_RETURN_IF_ERROR(ValidatePipelineParallelOptions(options));
  if (options.ranks == 1 || options.stages->rank() == 0) {
    return Status::InvalidArgument("pipeline parallelism: rank 0 drives the pipeline "
                                   "(PipelineDenseStage); only ranks 1..p-1 serve");
  }
  const int rank = options.stages->rank();
  const int p = options.ranks;
  Status status = [&]() -> Status {
    std::vector<int64_t> words(kFingerprintWords + static_cast<size_t>(p * options.virtual_stages));
    EMBER_RETURN_IF_ERROR(Broadcast(options.commands, &words, "receiving the pipeline's chunks"));
    const std::vector<int64_t> mine = GraphFingerprint(graph);
    if (!std::equal(mine.begin(), mine.end(), words.begin())) {
      return Status::FailedPrecondition(
          "the dense model differs from rank 0's: ", mine[0], " nodes, ", mine[1],
          " parameters, ", mine[2], " input and ", mine[3], " activation floats an example here, ",
          words[0], ", ", words[1], ", ", words[2], " and ", words[3],
          " on rank 0 (every rank must run with the same model flags and data)");
    }
    scheduler::PipelinePartition partition;
    int64_t first = 0;
    for (size_t i = kFingerprintWords; i < words.size(); ++i) {
      const int64_t end = words[i];
      partition.chunks.push_back({static_cast<int>(first), static_cast<int>(end)});
      first = end;
    }
    EMBER_ASSIGN_OR_RETURN(const std::vector<int> parameter_rank,
                           ParameterRanks(graph, partition, p));
    GraphChunkWorkOptions work_options;
    work_options.device = device;
    work_options.seed = seed;
    work_options.optimizer = optimizer;
    EMBER_ASSIGN_OR_RETURN(
        std::unique_ptr<GraphChunkWork> work,
        GraphChunkWork::Create(graph, partition,
                               {p, options.virtual_stages, options.micro_batches, options.group},
                               rank, work_options));
    std::map<int, Schedule> schedules;
    RankScheduleTimes times;  // After the first step.
    int64_t steps_run = 0;
    const int last = p - 1;
    const int64_t tasks = graph.values()[graph.outputs()[0]].elements();
    for (;;) {
      std::vector<int64_t> command(kCommandWords);
      EMBER_RETURN_IF_ERROR(Broadcast(options.commands, &command, "waiting for rank 0's command"));
      if (command[0] == kFinish) {
        if (times.steps > 0) {
          LOG(INFO) << "pipeline rank " << rank << " of " << p << ", schedule "
                    << ScheduleKindOf(options) << ": " << ToString(times);
        }
        return Status::OK();
      }
      if (command[0] == kGather || command[0] == kScatter) {
        EMBER_ASSIGN_OR_RETURN(RankParameters mine,
                               RankParametersOf(*work, graph, parameter_rank, rank));
        if (command[0] == kGather) {
          EMBER_RETURN_IF_ERROR(options.stages->Send(Pack(mine.ordered), 0, kParamsTag)
                                    .WithContext("sending the parameters to rank 0"));
        } else {
          std::vector<float> packed(static_cast<size_t>(PackedFloats(mine.ordered)));
          EMBER_RETURN_IF_ERROR(options.stages->Recv(packed, 0, kParamsTag)
                                    .WithContext("receiving the parameters from rank 0"));
          Unpack(packed, mine.ordered);
          EMBER_RETURN_IF_ERROR(work->ParametersFromHost(mine.host));
        }
        continue;
      }
      if (command[0] != kTrain) {
        return Status::Internal("pipeline rank ", rank, ": unknown command ", command[0]);
      }
      const int64_t batch = command[1];
      EMBER_ASSIGN_OR_RETURN(const Schedule* schedule, ScheduleFor(options, batch, &schedules));
      const int m = schedule->shape.micro_batches;
      const std::vector<int64_t> sizes = MicroBatchSizes(batch, m);
      std::vector<MicroBatchData> micro_batches(static_cast<size_t>(m));
      if (rank == last) {
        Tensor labels = Tensor::Empty({batch, tasks});
        EMBER_RETURN_IF_ERROR(options.stages->Recv(labels, 0, kLabelsTag)
                                  .WithContext("receiving the labels from rank 0"));
        int64_t begin = 0;
        for (int i = 0; i < m; ++i) {
          micro_batches[i].labels = Rows(labels, begin, begin + sizes[i]);
          begin += sizes[i];
        }
      }
      work->set_micro_batches(&micro_batches);
      work->set_micro_batch_sizes(sizes);
      work->set_loss_mean_over(batch * tasks);
      work->set_optimizer_steps(command[2]);
      EMBER_RETURN_IF_ERROR(RunRankSchedule(*schedule, rank, *work, options.stages,
                                            steps_run++ > 0 ? &times : nullptr));
      if (rank != last) continue;
      Tensor logits = Tensor::Empty({batch, tasks});
      EMBER_RETURN_IF_ERROR(StepLogits(*work, m, &logits));
      EMBER_RETURN_IF_ERROR(options.stages->Send(logits, 0, kLogitsTag)
                                .WithContext("sending the logits to rank 0"));
      const std::vector<double> loss = {work->step_loss()};
      EMBER_RETURN_IF_ERROR(
          options.stages->Send(loss, 0, kLossTag).WithContext("sending the loss to rank 0"));
    }
  }();
  if (!status.ok()) {
    status = status.WithContext("pipeline rank " + std::to_string(rank) + " of " +
                                std::to_string(p));
    options.stages->Abort(status);
    options.commands->Abort(status);
  }
  return status;
}

}  // namespace ember::pipeline
