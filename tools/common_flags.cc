#include "tools/common_flags.h"

#include <gflags/gflags.h>

namespace {

bool IsPositive64(const char*, int64_t value) { return value > 0; }
bool IsPositiveDouble(const char*, double value) { return value > 0; }
bool IsNonNegative32(const char*, int32_t value) { return value >= 0; }

}  // namespace

DEFINE_uint64(seed, 1,
              "Random seed: data shuffling, parameter initialisation and generated data. "
              "The same seed reproduces a run bit for bit.");
DEFINE_int32(threads, 0, "CPU threads Ember may use in total; 0 means every hardware thread.");
DEFINE_validator(threads, &IsNonNegative32);
DEFINE_int64(rows, 300000,
             "Examples to generate (gen-data, and train when --train_data is empty).");
DEFINE_validator(rows, &IsPositive64);
DEFINE_int64(vocabulary, 2000, "Generated data: distinct ids per categorical slot.");
DEFINE_validator(vocabulary, &IsPositive64);
DEFINE_double(zipf_exponent, 1.05, "Generated data: Zipf exponent of the ids in each slot.");
DEFINE_validator(zipf_exponent, &IsPositiveDouble);

namespace ember::tools {

io::SyntheticOptions SyntheticOptionsFromFlags() {
  io::SyntheticOptions options;
  options.rows = FLAGS_rows;
  options.seed = FLAGS_seed;
  options.vocabulary = FLAGS_vocabulary;
  options.zipf_exponent = FLAGS_zipf_exponent;
  return options;
}

}  // namespace ember::tools
