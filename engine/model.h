#pragma once

// A model of the zoo as a DenseModel (ops/dense_model.h): the graph that
// engine/model_zoo.h builds for ModelOptions, run where the options say.

#include <memory>

#include "core/status.h"
#include "engine/model_options.h"
#include "ops/dense_model.h"

namespace ember::engine {

using ops::DenseModel;
using ops::Parameter;

// Where and how the dense half of `options` runs.
ops::DenseModelOptions DenseModelOptionsOf(const ModelOptions& options);

// The dense half of the model `options` describes. InvalidArgument on
// inconsistent options or an unknown model name; FailedPrecondition for a
// CUDA device when Ember was built without CUDA or the device is absent.
Result<std::unique_ptr<DenseModel>> NewDenseModel(const ModelOptions& options);

}  // namespace ember::engine
