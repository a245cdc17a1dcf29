#pragma once

// The scores a Scorer gives every example of a data set, in batches of
// `batch_size` (the bundle and job tests compare them bit for bit).

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "engine/scorer.h"
#include "io/batch_source.h"
#include "io/dataset.h"

namespace ember::test {

inline Result<std::vector<float>> ScoreAll(engine::Scorer& scorer, const io::Dataset& data,
                                           int64_t batch_size) {
  io::DatasetBatchSourceOptions options;
  options.batch_size = batch_size;
  io::DatasetBatchSource source(data, options);
  std::vector<float> scores;
  EMBER_RETURN_IF_ERROR(scorer.ScoreAll(source, [&](const io::Batch& batch, const float* s) {
    scores.insert(scores.end(), s, s + batch.size * scorer.num_tasks());
    return Status::OK();
  }));
  return scores;
}

}  // namespace ember::test
