#include "engine/models/builtin.h"

namespace ember::engine::models {

// The built-in models, in registration order: X(Name) registers the
// ModelSpec that engine/models/<name>.cc defines as `ModelSpec NameSpec()`.
// A new model is a new file in this folder (CMake picks it up) and one line
// here.
#define EMBER_BUILTIN_MODELS(X) \
  X(Dlrm)                       \
  X(DeepFm)                     \
  X(WideDeep)                   \
  X(DcnV2)                      \
  X(Mmoe)                       \
  X(Moe)

#define EMBER_DECLARE_SPEC(Name) ModelSpec Name##Spec();
EMBER_BUILTIN_MODELS(EMBER_DECLARE_SPEC)
#undef EMBER_DECLARE_SPEC

Status RegisterBuiltinModels(ModelRegistry* registry) {
#define EMBER_REGISTER_SPEC(Name) EMBER_RETURN_IF_ERROR(registry->Register(Name##Spec()));
  EMBER_BUILTIN_MODELS(EMBER_REGISTER_SPEC)
#undef EMBER_REGISTER_SPEC
  return Status::OK();
}

}  // namespace ember::engine::models
