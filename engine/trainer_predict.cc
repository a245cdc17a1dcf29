// The trainer's predictions and evaluations: the model as trained so far,
// read only (the table and the dense half are left as they were).
#include <vector>

#include "engine/prediction.h"
#include "engine/trainer.h"

namespace ember::engine {

Result<std::vector<float>> Trainer::Predict(const io::Dataset& data) {
  io::DatasetBatchSourceOptions source_options;
  source_options.batch_size = options_.eval_batch_size;
  io::DatasetBatchSource source(data, source_options);
  std::vector<float> predictions;
  predictions.reserve(data.size() * model_->num_tasks());
  EMBER_RETURN_IF_ERROR(Predict(source, &predictions, nullptr));
  return predictions;
}

Status Trainer::Predict(io::BatchSource& data, std::vector<float>* predictions,
                        std::vector<float>* labels) {
  EMBER_RETURN_IF_ERROR(CheckShape(data));
  if (pipeline_stage_) EMBER_RETURN_IF_ERROR(pipeline_stage_->CopyParametersTo(*model_));
  Status status;
  arena_.Execute([&] {
    SetOpenMpThreads(arena_.threads());
    pipeline::StepState state;
    while (true) {
      Result<bool> more = data.Next(&state.batch);
      if (!more.ok()) status = more.status().WithContext("reading the evaluation data");
      if (!more.ok() || !*more) return;
      status = PredictBatch(step_, state, predictions);
      if (!status.ok()) return;
      if (labels != nullptr) {
        labels->insert(labels->end(), state.batch.labels.begin(), state.batch.labels.end());
      }
    }
  });
  return status;
}

Result<Metrics> Trainer::Evaluate(const io::Dataset& data) {
  EMBER_ASSIGN_OR_RETURN(std::vector<float> predictions, Predict(data));
  return ComputeTaskMetrics(predictions, data.all().labels, model_->num_tasks());
}

Result<Metrics> Trainer::Evaluate(io::BatchSource& data) {
  std::vector<float> predictions, labels;
  EMBER_RETURN_IF_ERROR(Predict(data, &predictions, &labels));
  if (predictions.empty()) return Status::InvalidArgument("the evaluation data has no examples");
  return ComputeTaskMetrics(predictions, labels, model_->num_tasks());
}


}  // namespace ember::engine
