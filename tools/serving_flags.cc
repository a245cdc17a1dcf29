#include "tools/flag_validators.h"
#include "tools/serving_flags.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>

#include "core/json.h"
#include "core/threads.h"
#include "engine/serving_input.h"
#include "io/columnar.h"
#include "io/criteo.h"
#include "io/synthetic.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/train_flags.h"

DEFINE_string(bundle, "",
              "The serving bundle (a directory): the one `ember export` writes, or that eval "
              "and predict score with. Required.");
DEFINE_string(delta_base, "",
              "export: write a delta bundle against the bundle in this directory (a full "
              "bundle, or a delta whose bases are where it names them): the embedding rows "
              "changed or removed and the dense weights since it, which a ranking service "
              "applies to the model it holds (ember_model_apply_delta). Empty: a full bundle.");
DEFINE_string(apply_deltas, "",
              "eval, predict: delta bundles to apply to --bundle before scoring, "
              "comma-separated, in order (each of the model the one before it left). Empty: "
              "none.");
DEFINE_string(data, "",
              "eval, predict: files to score, comma-separated (glob patterns allowed): "
              "columnar, or text in the format the bundle's training read (the format flags, "
              "when set, override it). Required.");
DEFINE_bool(labelled, true,
            "eval, predict: whether text lines begin with their label column(s). false "
            "(predict only): lines without labels, for criteo, libsvm, libffm and slot input.");
DEFINE_int32(score_batch_size, 4096,
             "eval, predict: examples per scoring batch. 4096 is the batch of the trainer's "
             "evaluation: with it (and the same --threads) scores equal training's bit for bit.");
DEFINE_validator(score_batch_size, &ember::tools::IsPositive32);
DEFINE_string(predictions_out, "",
              "predict: write the scores here (atomically), one line per input example in "
              "input order, one tab-separated probability per task. Required.");

namespace ember::tools {
namespace {

// The format flags of a text format (not --format, not --bad_lines).
constexpr const char* kFormatFlags[] = {
    "format",       "slot_bits",   "schema",      "schema_file",   "delimiter",
    "header",       "dense_transform", "dense_min", "dense_max",   "field_starts",
    "num_fields",   "require_binary_values", "slots", "dense_slots", "label_slots",
    "feasign_first", "ignore_unknown_slots",
};

bool AnyFormatFlagSet() {
  return std::any_of(std::begin(kFormatFlags), std::end(kFormatFlags), [](const char* name) {
    const gflags::CommandLineFlagInfo info = gflags::GetCommandLineFlagInfoOrDie(name);
    return info.current_value != info.default_value;
  });
}

}  // namespace

Result<io::FormatSpec> TrainingInputSpec(const std::vector<std::string>& train_paths,
                                         bool* columnar) {
  EMBER_ASSIGN_OR_RETURN(io::FormatSpec spec, RecordedTrainingInputSpec(train_paths.empty()));
  if (!train_paths.empty()) {
    EMBER_ASSIGN_OR_RETURN(const InputFormat format, ResolveInputFormat(train_paths));
    *columnar = format.columnar;
    return spec;
  }
  // Generated data (train_command.cc): Criteo TSV for Criteo's shape.
  EMBER_ASSIGN_OR_RETURN(const io::SyntheticOptions synthetic, SyntheticOptionsFromFlags());
  *columnar = !(synthetic.num_dense == io::kCriteoDense &&
                synthetic.num_slots == io::kCriteoSlots && synthetic.multi_hot_slots == 0 &&
                synthetic.num_tasks <= 1);
  return spec;
}

Result<io::FormatSpec> RecordedTrainingInputSpec(bool generated_data) {
  EMBER_ASSIGN_OR_RETURN(io::FormatSpec spec, FormatSpecFromFlags());
  // Generated data is written as Criteo TSV when it has Criteo's shape.
  if (generated_data) spec.name = "criteo";
  return spec;
}

Result<std::unique_ptr<io::StreamReader>> OpenScoringInput(const engine::BundleConfig& config,
                                                           bool fail_on_bad_line) {
  if (FLAGS_data.empty()) return Status::InvalidArgument("--data is required");
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                         ExpandPathList("data", FLAGS_data));
  EMBER_ASSIGN_OR_RETURN(io::TextReadOptions read, TextReadOptionsFromFlags());
  io::StreamReaderOptions options;
  options.batch_size = FLAGS_score_batch_size;
  options.threads = std::max(1, (FLAGS_threads > 0 ? FLAGS_threads : HardwareThreads()) / 4);
  options.bad_lines = fail_on_bad_line ? io::BadLinePolicy::kFail : read.bad_lines;
  options.max_bad_ratio = read.max_bad_ratio;
  const int slot_bits = config.input.slot_bits;
  if (std::all_of(paths.begin(), paths.end(), LooksColumnar)) {
    EMBER_ASSIGN_OR_RETURN(auto first, io::OpenColumnar(paths.front()));
    if (first->shape().slot_bits != slot_bits) {
      return Status::InvalidArgument("--data: ", paths.front(), " holds keys of ",
                                     first->shape().slot_bits, " slot bits, the bundle's model ",
                                     slot_bits);
    }
    Result<std::unique_ptr<io::StreamReader>> reader =
        io::StreamReader::OpenColumnar(paths, options);
    if (!reader.ok()) return reader.status().WithContext("--data");
    return reader;
  }
  io::FormatSpec spec = config.input;
  if (AnyFormatFlagSet()) {
    EMBER_ASSIGN_OR_RETURN(spec, FormatSpecFromFlags());
  } else if (config.columnar_input) {
    return Status::InvalidArgument(
        "--data: the bundle's model was trained on columnar files; score columnar files "
        "(`ember convert` with the training's format flags) or name the text format with "
        "--format and its flags");
  }
  if (spec.slot_bits != slot_bits) {
    return Status::InvalidArgument("--slot_bits=", spec.slot_bits, ": the bundle's keys were "
                                   "hashed with ", slot_bits, " slot bits");
  }
  Result<std::unique_ptr<io::TextFormat>> format =
      engine::ServingTextFormat(spec, FLAGS_labelled);
  if (!format.ok()) return format.status().WithContext("--data");
  Result<std::unique_ptr<io::StreamReader>> reader =
      io::StreamReader::OpenText(paths, **format, options);
  if (!reader.ok()) return reader.status().WithContext("--data");
  return reader;
}

Json TestMetricsJson(const engine::Metrics& test) {
  Json json = {{"auc", test.auc},
               {"logloss", test.logloss},
               {"calibration", test.calibration},
               {"examples", test.examples}};
  if (test.tasks.empty()) return json;
  std::vector<double> aucs, loglosses;
  for (const engine::Metrics& task : test.tasks) {
    aucs.push_back(task.auc);
    loglosses.push_back(task.logloss);
  }
  json["task_auc"] = aucs;
  json["task_logloss"] = loglosses;
  return json;
}

void PrintTestMetrics(const engine::Metrics& test) {
  std::printf("test:  AUC %.4f  logloss %.4f  calibration %.3f  (%lld examples)\n", test.auc,
              test.logloss, test.calibration, static_cast<long long>(test.examples));
  // A multi-task model: every task's metrics (task 0's are those above).
  for (size_t t = 0; t < test.tasks.size(); ++t) {
    const engine::Metrics& task = test.tasks[t];
    std::printf("  task %zu: AUC %.4f  logloss %.4f  calibration %.3f  positive rate %.3f\n", t,
                task.auc, task.logloss, task.calibration, task.positive_rate);
  }
}

Result<int64_t> EmbeddingMemoryBudgetFromFlags() {
  if (FLAGS_embedding_memory_budget.empty()) return int64_t{0};
  EMBER_ASSIGN_OR_RETURN(const int64_t bytes,
                         ParseByteSize("embedding_memory_budget", FLAGS_embedding_memory_budget));
  if (bytes == 0) return Status::InvalidArgument("--embedding_memory_budget must be > 0 when set");
  return bytes;
}

Result<engine::ScorerOptions> ScorerOptionsFromFlags() {
  engine::ScorerOptions options;
  options.threads = FLAGS_threads;
  EMBER_ASSIGN_OR_RETURN(options.memory_budget_bytes, EmbeddingMemoryBudgetFromFlags());
  if (options.memory_budget_bytes > 0) {
    if (FLAGS_embedding_dir.empty()) {
      return Status::InvalidArgument(
          "--embedding_memory_budget needs --embedding_dir (where the rows beyond it go)");
    }
    options.disk_path = FLAGS_embedding_dir;
  }
  options.make_table = embedding::NewEmbeddingTable;
  return options;
}

}  // namespace ember::tools

namespace ember::tools {

Result<std::unique_ptr<engine::Scorer>> OpenScorerFromFlags() {
  EMBER_ASSIGN_OR_RETURN(const engine::ScorerOptions options, ScorerOptionsFromFlags());
  Result<std::unique_ptr<engine::Scorer>> scorer = engine::Scorer::Open(FLAGS_bundle, options);
  if (!scorer.ok()) return scorer.status().WithContext("--bundle");
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> deltas,
                         ExpandPathList("apply_deltas", FLAGS_apply_deltas));
  for (const std::string& delta : deltas) {
    EMBER_RETURN_IF_ERROR((*scorer)->ApplyDelta(delta).WithContext("--apply_deltas"));
  }
  return scorer;
}

}  // namespace ember::tools
