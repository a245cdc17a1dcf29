#include "engine/prediction.h"

#include "core/tensor.h"
#include "ops/dense_ops.h"

namespace ember::engine {

Status PredictBatch(pipeline::TrainingStep& step, pipeline::StepState& state,
                    std::vector<float>* probabilities) {
  const int64_t outputs = state.batch.size * step.model().num_tasks();
  EMBER_RETURN_IF_ERROR(step.Prepare(state));
  EMBER_RETURN_IF_ERROR(step.Lookup(state));
  EMBER_RETURN_IF_ERROR(step.Forward(state));
  Tensor p = Tensor::Empty({outputs});
  EMBER_RETURN_IF_ERROR(ops::Sigmoid(state.logits.Reshape({outputs}), &p));
  probabilities->insert(probabilities->end(), p.data<float>(), p.data<float>() + outputs);
  return Status::OK();
}

}  // namespace ember::engine
