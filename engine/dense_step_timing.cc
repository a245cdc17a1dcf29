#include "engine/dense_step_timing.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/trace.h"
#include "engine/model_zoo.h"
#include "engine/trainer.h"
#include "io/batch.h"
#include "io/dataset.h"
#include "scheduler/stage.h"

namespace ember::engine {
namespace {

// `batches` batches of random examples of the model's shape: labels 0/1,
// dense features in [0, 1), one key per slot from 1000 per slot (the dense
// step does not depend on the values; the pooling's backward only on how
// many distinct keys a batch has, which stays small either way).
io::Dataset RandomData(const ModelOptions& model, int64_t batch, int batches, uint64_t seed) {
  const int64_t n = batch * batches;
  io::Batch all;
  all.Clear(model.num_dense, model.num_slots, model.num_tasks);
  all.size = n;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  all.labels.resize(n * model.num_tasks);
  for (float& label : all.labels) label = unit(rng) < 0.25f ? 1.0f : 0.0f;
  all.dense.resize(n * model.num_dense);
  for (float& value : all.dense) value = unit(rng);
  all.offsets.resize(n * model.num_slots + 1);
  all.keys.resize(n * model.num_slots);
  for (int64_t i = 0; i < n * model.num_slots; ++i) {
    all.offsets[i] = i;
    const uint64_t slot = static_cast<uint64_t>(i % model.num_slots);
    all.keys[i] = (slot << 54) | (rng() % 1000);
  }
  all.offsets[n * model.num_slots] = n * model.num_slots;
  return io::Dataset(std::move(all));
}

// Durations of the "dense" spans of `tracer` from event `first` on, seconds.
std::vector<double> DenseSpans(const Tracer& tracer, size_t first) {
  std::vector<double> seconds;
  const std::vector<Tracer::Event> events = tracer.Events();
  for (size_t i = first; i < events.size(); ++i) {
    if (events[i].name == scheduler::StageName(scheduler::Stage::kDense)) seconds.push_back(events[i].duration_us * 1e-6);
  }
  return seconds;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

Result<double> TimeDenseStep(const DenseStepTimingOptions& options) {
  const ModelOptions& model = options.model;
  TrainOptions train;
  train.model = model;
  train.table.dim = model.embedding_dim;
  train.batch_size = static_cast<int>(options.batch);
  train.threads = options.threads;
  train.seed = model.seed;
  train.shuffle = false;
  train.dense_optimizer = options.optimizer;
  train.pipeline.pipelined = false;
  train.show_progress = false;
  train.pipeline.watchdog_seconds = 0.0;
  Tracer tracer;
  train.pipeline.tracer = &tracer;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                         Trainer::Create(train, model.num_dense, model.num_slots, model.num_tasks));

  const int warmup = std::max(1, options.warmup_steps);
  EMBER_RETURN_IF_ERROR(trainer->Fit(RandomData(model, options.batch, warmup, 1)).status());
  // The last warm-up step says how many timed steps fit the target.
  const double warm = DenseSpans(tracer, 0).back();
  const int min_steps = std::max(1, options.min_steps);
  const int steps = std::clamp(static_cast<int>(options.target_seconds / std::max(warm, 1e-6)),
                               min_steps, std::max(min_steps, options.max_steps));
  const size_t first = tracer.Events().size();
  EMBER_RETURN_IF_ERROR(trainer->Fit(RandomData(model, options.batch, steps, 2)).status());
  return Median(DenseSpans(tracer, first));
}

std::string DenseStepDescriptor(const ModelOptions& model,
                                const ops::DenseOptimizerOptions& optimizer) {
  std::string text = model.name + " dense=" + std::to_string(model.num_dense) +
                     " slots=" + std::to_string(model.num_slots) +
                     " dim=" + std::to_string(model.embedding_dim) +
                     " tasks=" + std::to_string(model.num_tasks);
  // The model's own parameters, defaults included (those given when the
  // options do not resolve; building them fails later).
  Result<ModelOptions> resolved = ResolveModelOptions(model);
  for (const auto& [name, value] : (resolved.ok() ? *resolved : model).params.values()) {
    text += " " + name + "=" + FormatModelParamValue(value);
  }
  text += " top=" + JoinWidths(model.top_mlp) + " optimizer=" + ops::DenseOptimizerName(optimizer.type);
  return text;
}

}  // namespace ember::engine
