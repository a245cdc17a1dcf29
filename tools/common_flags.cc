#include "tools/common_flags.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/flag_validators.h"
#include "tools/format_flags.h"

namespace {


const ember::io::SyntheticOptions kSyntheticDefaults;

}  // namespace

DEFINE_uint64(seed, 1,
              "Random seed: data shuffling, parameter initialisation and generated data. "
              "The same seed reproduces a run bit for bit.");
DEFINE_int32(threads, 0, "CPU threads Ember may use in total; 0 means every hardware thread.");
DEFINE_double(progress_seconds, 10,
              "Seconds between the progress lines of long commands (train steps, gen-data rows, "
              "...) when stderr is not a terminal (a terminal's line updates in place).");
DEFINE_validator(progress_seconds, &ember::tools::IsPositiveDouble);
DEFINE_validator(threads, &ember::tools::IsNonNegative32);
DEFINE_int64(rows, kSyntheticDefaults.rows,
             "Examples to generate (gen-data, and train when --train_data is empty).");
DEFINE_validator(rows, &ember::tools::IsPositive64);
DEFINE_string(vocabulary, std::to_string(kSyntheticDefaults.vocabulary),
              "Generated data: distinct ids per categorical slot, one value for every slot or "
              "a comma-separated list of --num_slots values (slot by slot).");
DEFINE_double(zipf_exponent, kSyntheticDefaults.zipf_exponent,
              "Generated data: Zipf exponent of the ids in each slot.");
DEFINE_validator(zipf_exponent, &ember::tools::IsPositiveDouble);
DEFINE_double(id_weight_scale, kSyntheticDefaults.id_weight_scale,
              "Generated data: standard deviation of each id's weight in the planted logit.");
DEFINE_double(interaction_scale, kSyntheticDefaults.interaction_scale,
              "Generated data: scale of the latent vectors whose dot products add pairwise "
              "interactions between the first --interacting_slots slots.");
DEFINE_int32(interacting_slots, kSyntheticDefaults.interacting_slots,
             "Generated data: how many of the first slots interact pairwise (by default at "
             "most --num_slots).");
DEFINE_int32(num_dense, kSyntheticDefaults.num_dense,
             "Generated data: dense (count) columns per example; other than 13 needs "
             "gen-data --out_format=csv or columnar.");
DEFINE_validator(num_dense, &ember::tools::IsNonNegative32);
DEFINE_int32(num_slots, kSyntheticDefaults.num_slots,
             "Generated data: categorical slots per example, multi-hot ones included; other "
             "than 26 needs gen-data --out_format=csv or columnar.");
DEFINE_validator(num_slots, &ember::tools::IsPositive32);
DEFINE_int32(multi_hot_slots, kSyntheticDefaults.multi_hot_slots,
             "Generated data: how many of the last slots hold a bag of 0 to --max_bag_size "
             "ids instead of one id (needs gen-data --out_format=csv or columnar).");
DEFINE_validator(multi_hot_slots, &ember::tools::IsNonNegative32);
DEFINE_int32(max_bag_size, kSyntheticDefaults.max_bag_size,
             "Generated data: largest bag of a multi-hot slot, in ids (bag sizes are uniform "
             "in [0, max_bag_size]).");
DEFINE_validator(max_bag_size, &ember::tools::IsPositive32);
DEFINE_int32(tasks, 0,
             "Generated data: labels per example (click, conversion, ...; more than one "
             "needs gen-data --out_format=csv or columnar). 0: 2 for ember train "
             "--model=mmoe, 1 otherwise.");
DEFINE_validator(tasks, &ember::tools::IsNonNegative32);

namespace ember::tools {

Result<io::SyntheticOptions> SyntheticOptionsFromFlags() {
  io::SyntheticOptions options;
  options.rows = FLAGS_rows;
  options.seed = FLAGS_seed;
  options.zipf_exponent = FLAGS_zipf_exponent;
  options.id_weight_scale = FLAGS_id_weight_scale;
  options.interaction_scale = FLAGS_interaction_scale;
  options.interacting_slots = FLAGS_interacting_slots;
  // The default interacts the first 6 slots; with fewer slots, all of them.
  if (gflags::GetCommandLineFlagInfoOrDie("interacting_slots").is_default) {
    options.interacting_slots = std::min(options.interacting_slots, FLAGS_num_slots);
  }
  options.num_dense = FLAGS_num_dense;
  options.num_slots = FLAGS_num_slots;
  options.multi_hot_slots = FLAGS_multi_hot_slots;
  options.max_bag_size = FLAGS_max_bag_size;
  options.num_tasks = FLAGS_tasks > 0 ? FLAGS_tasks : 1;
  options.slot_bits = FLAGS_slot_bits;
  std::vector<int64_t> vocabularies;
  for (const std::string& item : SplitList(FLAGS_vocabulary)) {
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || ptr != item.data() + item.size() || value < 1) {
      return Status::InvalidArgument("--vocabulary=", FLAGS_vocabulary, ": '", item,
                                     "' is not a positive integer");
    }
    vocabularies.push_back(value);
  }
  if (vocabularies.empty()) {
    return Status::InvalidArgument("--vocabulary is empty; give one value or one per slot");
  }
  if (vocabularies.size() == 1) {
    options.vocabulary = vocabularies.front();
  } else if (static_cast<int>(vocabularies.size()) == options.num_slots) {
    options.slot_vocabularies = std::move(vocabularies);
  } else {
    return Status::InvalidArgument(
        "--vocabulary has ", vocabularies.size(),
        " values; give one, or one per slot (--num_slots=", options.num_slots, ")");
  }
  return options;
}

}  // namespace ember::tools
