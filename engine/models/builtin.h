#pragma once

// The models of the zoo that Ember ships: one file each in engine/models/,
// all registered by RegisterBuiltinModels (builtin.cc, one line per model).

#include "core/status.h"
#include "engine/model_registry.h"

namespace ember::engine::models {

// Registers dlrm, deepfm, wide_deep, dcn_v2 and mmoe, in that order (the
// order of ModelNames() and of the "available:" list). The errors of
// ModelRegistry::Register: AlreadyExists when `registry` already holds one
// of these names.
Status RegisterBuiltinModels(ModelRegistry* registry);

}  // namespace ember::engine::models
