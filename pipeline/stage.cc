#include "pipeline/stage.h"

namespace ember::pipeline {

int StageTimes::Bottleneck() const {
  int best = -1;
  for (size_t i = 0; i < busy_seconds.size(); ++i) {
    if (best < 0 || busy_seconds[i] > busy_seconds[best]) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace ember::pipeline
