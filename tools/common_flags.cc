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
DEFINE_int64(rows, ember::io::SyntheticOptions().rows,
             "Examples to generate (gen-data, and train when --train_data is empty).");
DEFINE_validator(rows, &IsPositive64);
DEFINE_int64(vocabulary, ember::io::SyntheticOptions().vocabulary, "Generated data: distinct ids per categorical slot.");
DEFINE_validator(vocabulary, &IsPositive64);
DEFINE_double(zipf_exponent, ember::io::SyntheticOptions().zipf_exponent, "Generated data: Zipf exponent of the ids in each slot.");
DEFINE_validator(zipf_exponent, &IsPositiveDouble);
DEFINE_double(id_weight_scale, ember::io::SyntheticOptions().id_weight_scale,
              "Generated data: standard deviation of each id's weight in the planted logit.");
DEFINE_double(interaction_scale, ember::io::SyntheticOptions().interaction_scale,
              "Generated data: scale of the latent vectors whose dot products add pairwise "
              "interactions between the first --interacting_slots slots.");
DEFINE_int32(interacting_slots, ember::io::SyntheticOptions().interacting_slots, "Generated data: slots that interact pairwise.");

namespace ember::tools {

io::SyntheticOptions SyntheticOptionsFromFlags() {
  io::SyntheticOptions options;
  options.rows = FLAGS_rows;
  options.seed = FLAGS_seed;
  options.vocabulary = FLAGS_vocabulary;
  options.zipf_exponent = FLAGS_zipf_exponent;
  options.id_weight_scale = FLAGS_id_weight_scale;
  options.interaction_scale = FLAGS_interaction_scale;
  options.interacting_slots = FLAGS_interacting_slots;
  return options;
}

}  // namespace ember::tools
