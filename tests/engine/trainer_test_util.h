#pragma once

// The fixture of the trainer's tests (trainer_learning_test.cc,
// trainer_equivalence_test.cc, trainer_run_control_test.cc): a small model's
// options, and synthetic Criteo data in the test's own directory.

#include <cstdint>
#include <string>

#include "core/status.h"
#include "engine/train_options.h"
#include "io/criteo.h"
#include "io/dataset.h"
#include "io/synthetic.h"
#include "tests/testing/temp_dir.h"

namespace ember::test {

class TrainerTest : public TempDirTest {
 protected:
  static engine::TrainOptions SmallOptions() {
    engine::TrainOptions options;
    options.model.params.Set("bottom_mlp", std::vector<int>{64, 16});
    options.model.top_mlp = {64, 32};
    options.batch_size = 256;
    options.threads = 2;
    options.show_progress = false;
    return options;
  }

  // `synthetic`'s examples as Criteo, written to small.tsv and read back.
  Result<io::Dataset> SyntheticData(const io::SyntheticOptions& synthetic) {
    const std::string path = (dir_ / "small.tsv").string();
    EMBER_RETURN_IF_ERROR(io::WriteSyntheticCriteo(path, synthetic).status());
    return io::ReadCriteoFiles({path}, io::CriteoReadOptions{});
  }
  // `rows` synthetic Criteo examples of the default options.
  Result<io::Dataset> SyntheticData(int64_t rows) {
    io::SyntheticOptions synthetic;
    synthetic.rows = rows;
    return SyntheticData(synthetic);
  }
};

}  // namespace ember::test
