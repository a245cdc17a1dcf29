#include "scheduler/stage.h"

namespace ember::scheduler {

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kRead:
      return "read";
    case Stage::kUnique:
      return "unique";
    case Stage::kPull:
      return "pull";
    case Stage::kDense:
      return "dense";
    case Stage::kPush:
      return "push";
  }
  return "?";
}

}  // namespace ember::scheduler
