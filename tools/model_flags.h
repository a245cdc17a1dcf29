#pragma once

// The flags of the model zoo: --model, and one flag per parameter a model
// declares (engine::ModelSpec::params, engine/model_params.h), defined at run
// time from engine::DefaultModelRegistry(). A model's options are thus its
// file's alone: their flags, defaults, help lines and checks come from its
// declarations (`ember help train` lists them in the model topic).

#include <string>
#include <vector>

#include "core/status.h"
#include "engine/model_params.h"

namespace ember::tools {

// Defines --model and the models' parameter flags, once (later calls do
// nothing). Call it before the command line is checked or parsed, and
// before any help text is made. A parameter named like a flag defined
// elsewhere is a programming error (CHECK): every test that runs ember
// finds it.
void DefineModelFlags();

// --model's value. REQUIRES: DefineModelFlags().
std::string ModelFlag();

// The parameters' flags: those of the registered models in registration
// and declaration order, each once (dlrm's and moe's --bottom_mlp is one).
std::vector<std::string> ModelParamFlagNames();

// The parameters of model `model` (its declared ones, from their flags);
// InvalidArgument naming the flag for a value of the wrong form ("a,b"
// widths) or for a model that is not registered. Each value's own checks are
// engine::ResolveModelOptions'. A flag of another model's parameter set on
// the command line is ignored, with a warning.
Result<engine::ModelParams> ModelParamsFromFlags(const std::string& model);

}  // namespace ember::tools
