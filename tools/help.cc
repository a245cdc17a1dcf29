#include "tools/help.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <utility>

#include "io/text_format_registry.h"
#include "tools/model_flags.h"

namespace ember::tools {
namespace {

#ifndef EMBER_VERSION
#define EMBER_VERSION "unknown"
#endif
#ifndef EMBER_GIT_COMMIT
#define EMBER_GIT_COMMIT ""
#endif

struct Command {
  const char* name;
  const char* summary;  // Lines of `ember help`, the first also heads `ember help CMD`.
};

constexpr Command kCommands[] = {
    {"train",
     "train a CTR model and report test AUC and logloss\n"
     "(with no --train_data: on data generated from a planted model)"},
    {"convert",
     "convert criteo, csv, libsvm, libffm or slot text files to\n"
     "Ember's columnar format (the fast path for repeated epochs)"},
    {"gen-data",
     "write synthetic click data (criteo, csv or columnar) from a\n"
     "planted model, with its Bayes AUC beside it"},
    {"export",
     "write the serving bundle of a training job's newest checkpoint\n"
     "(--checkpoint_dir) to --bundle: model configuration, dense\n"
     "weights and embedding vectors, checksummed"},
    {"eval",
     "AUC, logloss and calibration of a --bundle on labelled --data,\n"
     "as `ember train` reports its test metrics"},
    {"predict",
     "score --data with a --bundle: one line of probabilities per\n"
     "example, in input order, into --predictions_out"},
    {"plan",
     "plan a training job (the flags of train) on this host or a\n"
     "--cluster file: placement, predicted stage times, samples/s\n"
     "and memory, disk and bandwidth needs, and with --pipeline_ranks\n"
     "the pipeline (ranks, chunks, micro-batches, schedule) of the\n"
     "dense graph; or draw a pipeline schedule (--draw_schedule)\n"
     "with its predicted bubble"},
};

// Topics, in the order help lists them.
enum class Topic {
  kData,
  kFormat,
  kGenerated,
  kModel,
  kTraining,
  kOptimizers,
  kEmbedding,
  kPipeline,
  kCheckpoints,
  kOutput,
  kPlanning,
  kLogging,
  kOther,  // A flag missing from kTopics: listed, never hidden.
};

const char* TopicTitle(Topic topic) {
  switch (topic) {
    case Topic::kData: return "Data";
    case Topic::kFormat: return "Input format";
    case Topic::kGenerated: return "Generated data";
    case Topic::kModel: return "Model";
    case Topic::kTraining: return "Training";
    case Topic::kOptimizers: return "Optimizers";
    case Topic::kEmbedding: return "Embedding tables";
    case Topic::kPipeline: return "Threads and pipeline";
    case Topic::kCheckpoints: return "Checkpoints";
    case Topic::kOutput: return "Output";
    case Topic::kPlanning: return "Planning";
    case Topic::kLogging: return "Logging and flagfiles";
    case Topic::kOther: return "Other";
  }
  return "Other";
}

// The flags of each topic, in the order help lists them: every flag of
// tools/ (a new flag gets its name here, or help lists it under "Other") and
// the gflags and glog flags of kSharedLibraryFlags.
struct TopicFlags {
  Topic topic;
  std::vector<std::string> names;
};

// --format and --slot_bits, the options of every registered text format
// (their flags have the options' keys, tools/format_flags.cc), then the
// bad-line policy.
std::vector<std::string> FormatTopicFlags() {
  std::vector<std::string> names = {"format", "slot_bits"};
  for (const std::string& key : io::TextFormatOptionKeys()) names.push_back(key);
  names.insert(names.end(), {"bad_lines", "max_bad_ratio"});
  return names;
}

// --model, the options every model has, each model's own (their flags come
// from the model registry, tools/model_flags.h), then where it runs.
std::vector<std::string> ModelTopicFlags() {
  std::vector<std::string> names = {"model", "embedding_dim", "top_mlp"};
  for (const std::string& name : ModelParamFlagNames()) names.push_back(name);
  names.insert(names.end(), {"expert_parallel", "dense_device", "dense_precision", "dense_row_shards"});
  return names;
}

const std::vector<TopicFlags>& Topics() {
  static const std::vector<TopicFlags> topics = {
      {Topic::kData,
       {"train_data", "test_data", "test_fraction", "reader", "reader_threads", "shuffle",
        "shard_in_memory_data",
        "shuffle_buffer", "num_shards", "shard_index", "piece_kib", "input", "output",
        "rows_per_group", "out", "out_format", "bundle", "data", "labelled",
        "score_batch_size"}},
      {Topic::kFormat, FormatTopicFlags()},
      {Topic::kGenerated,
       {"rows", "vocabulary", "zipf_exponent", "id_weight_scale", "interaction_scale",
        "interacting_slots", "num_dense", "num_slots", "multi_hot_slots", "max_bag_size", "tasks"}},
      {Topic::kModel, ModelTopicFlags()},
      {Topic::kTraining,
       {"batch_size", "epochs", "max_steps", "seed", "eval_every_steps", "eval_every_epoch"}},
      {Topic::kOptimizers,
       {"sparse_optimizer", "sparse_lr", "ftrl_beta", "ftrl_l1", "ftrl_l2", "dense_optimizer",
        "dense_lr"}},
      {Topic::kEmbedding,
       {"admission", "admission_min_count", "admission_probability", "embedding_ttl_steps",
        "embedding_memory_budget", "embedding_eviction", "embedding_weights", "embedding_dir",
        "embedding_reserve_rows", "prefetch"}},
      {Topic::kPipeline,
       {"threads", "pipeline", "pipeline_depth", "stage_threads", "max_staleness", "early_pulls",
        "read_ahead", "watchdog_seconds", "rank_timeout_seconds", "mesh", "table_sharding",
        "dense_bucket_kib",
        "pipeline_parallel",
        "virtual_stages", "micro_batches", "pipeline_group", "pipeline_schedule"}},
      {Topic::kCheckpoints, {"checkpoint_dir", "checkpoint_every_steps", "resume", "keep_best"}},
      {Topic::kOutput,
       {"predictions_out", "metrics_out", "export_dir", "trace_file", "plot_out", "model_hash",
        "timing_warmup_steps", "plan_out", "dot_out"}},
      {Topic::kPlanning,
       {"plan", "cluster", "ranks", "recalibrate", "calibration_dir", "plan_batch_sizes", "plan_threads",
        "plan_memory_limit", "plan_refine_from", "network_scale", "draw_schedule",
        "schedule_ranks", "schedule_virtual_stages", "schedule_micro_batches", "schedule_group",
        "pipeline_ranks",
        "pipeline_activation_limit"}},
      {Topic::kLogging, {"flagfile", "v", "log_dir", "progress_seconds"}},
  };
  return topics;
}

// The topic of `name` and its place in Topics(); kOther after all others.
std::pair<Topic, int> TopicOf(const std::string& name) {
  int place = 0;
  for (const TopicFlags& topic : Topics()) {
    for (const std::string& member : topic.names) {
      if (member == name) return {topic.topic, place};
      ++place;
    }
  }
  return {Topic::kOther, place};
}

// Which flags a command reads: those defined in `file` (a path suffix), all
// of them or the `only` ones, leaving out the topics in `except`.
struct FlagSource {
  const char* command;
  const char* file;
  std::vector<std::string> only;
  std::vector<Topic> except;
};

const std::vector<FlagSource>& FlagSources() {
  static const std::vector<FlagSource> sources = {
      {"train", "tools/train_flags.cc", {}, {}},
      {"train", "tools/format_flags.cc", {}, {}},
      {"train", "tools/plan_flags.cc", {}, {}},
      {"train", "tools/common_flags.cc", {}, {}},
      {"train", "tools/model_flags.cc", {}, {}},
      // `ember plan` costs the job the flags of train describe, not its outputs.
      {"plan", "tools/plan_command.cc", {}, {}},
      {"plan", "tools/plan_flags.cc", {}, {}},
      {"plan", "tools/train_flags.cc", {}, {Topic::kCheckpoints, Topic::kOutput}},
      {"plan", "tools/format_flags.cc", {}, {}},
      {"plan", "tools/common_flags.cc", {}, {}},
      {"plan", "tools/model_flags.cc", {}, {}},
      {"convert", "tools/convert_command.cc", {}, {}},
      {"convert", "tools/format_flags.cc", {}, {}},
      {"convert", "tools/common_flags.cc", {"threads", "progress_seconds"}, {}},
      {"gen-data", "tools/gen_data_command.cc", {}, {}},
      {"gen-data", "tools/common_flags.cc", {}, {Topic::kPipeline}},
      {"gen-data", "tools/format_flags.cc", {"slot_bits"}, {}},
      {"export", "tools/serving_flags.cc", {"bundle", "delta_base"}, {}},
      {"export", "tools/train_flags.cc", {"checkpoint_dir"}, {}},
      {"eval", "tools/serving_flags.cc",
       {"bundle", "apply_deltas", "data", "labelled", "score_batch_size"}, {}},
      {"eval", "tools/train_flags.cc",
       {"metrics_out", "embedding_memory_budget", "embedding_dir"}, {}},
      {"eval", "tools/format_flags.cc", {}, {}},
      {"eval", "tools/common_flags.cc", {"threads", "progress_seconds"}, {}},
      {"predict", "tools/serving_flags.cc", {}, {}},
      {"predict", "tools/train_flags.cc", {"embedding_memory_budget", "embedding_dir"}, {}},
      {"predict", "tools/format_flags.cc", {}, {}},
      {"predict", "tools/common_flags.cc", {"threads", "progress_seconds"}, {}},
  };
  return sources;
}

// gflags' and glog's flags shown with every command, with help in Ember's words.
constexpr std::pair<const char*, const char*> kSharedLibraryFlags[] = {
    {"flagfile",
     "Read flags from FILE, one --name=value per line ('#' starts a comment; a line may be "
     "another --flagfile); the command line's flags after it override it. An unknown name or "
     "a value after a space is an error naming the line."},
    {"v", "Log detail at this verbosity (VLOG): 1 adds every flag's value, 2 and 3 more."},
    {"log_dir", "Write logs to files in this directory instead of stderr."},
};

// The help of `flag` as help shows it: --format's with the registered text
// formats' names.
std::string Description(const gflags::CommandLineFlagInfo& flag) {
  for (const auto& [name, help] : kSharedLibraryFlags) {
    if (flag.name == name) return help;
  }
  if (flag.name == "format") {
    std::string names;
    for (const std::string& name : io::DefaultTextFormatRegistry().Names()) {
      names += (names.empty() ? "" : ", ") + name;
    }
    return flag.description + " Text formats: " + names + ".";
  }
  return flag.description;
}

bool Reads(const std::string& command, const gflags::CommandLineFlagInfo& flag) {
  for (const auto& [name, help] : kSharedLibraryFlags) {
    if (flag.name == name) return true;
  }
  for (const FlagSource& source : FlagSources()) {
    if (command != source.command || !flag.filename.ends_with(source.file)) continue;
    if (!source.only.empty() &&
        std::find(source.only.begin(), source.only.end(), flag.name) == source.only.end()) {
      continue;
    }
    if (std::find(source.except.begin(), source.except.end(), TopicOf(flag.name).first) !=
        source.except.end()) {
      continue;
    }
    return true;
  }
  return false;
}

const Command* FindCommand(const std::string& name) {
  for (const Command& command : kCommands) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

// `text` with its lines after the first indented by `indent` spaces.
std::string Indented(const std::string& text, int indent) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += std::string(indent, ' ');
  }
  return out;
}

constexpr int kHelpColumn = 30;  // Where a flag's help starts.
constexpr int kHelpWidth = 100;

// "  --batch_size                Examples per training step. (default: 256)"
std::string FlagLine(const gflags::CommandLineFlagInfo& flag) {
  std::string line = "  --" + flag.name;
  if (static_cast<int>(line.size()) + 2 > kHelpColumn) {
    line += "\n";
    line.resize(line.size() + kHelpColumn, ' ');
  } else {
    line.resize(kHelpColumn, ' ');
  }
  // The default stays on one line: its spaces are joined while wrapping.
  std::string default_text = "(default: " + ReadableFlagValue(flag.type, flag.default_value) + ")";
  std::replace(default_text.begin(), default_text.end(), ' ', '\x1f');
  std::string text = WrapText(Description(flag) + " " + default_text, kHelpColumn, kHelpWidth);
  std::replace(text.begin(), text.end(), '\x1f', ' ');
  return line + text + "\n";
}

}  // namespace

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (const Command& command : kCommands) names.push_back(command.name);
  return names;
}

bool IsCommand(const std::string& name) { return FindCommand(name) != nullptr; }

std::string UsageText() {
  std::string text =
      "ember <command> [--flag=value ...] [--flagfile=FILE]\n"
      "\n"
      "Commands:\n";
  for (const Command& command : kCommands) {
    std::string name = std::string("  ") + command.name;
    name.resize(12, ' ');
    text += name + Indented(command.summary, 12) + "\n";
  }
  text +=
      "\n"
      "`ember help <command>` (or `ember <command> --help`) lists the command's flags by\n"
      "topic with their defaults; `ember --version` prints the version.\n"
      "A flagfile holds one --name=value per line (# starts a comment); an unknown\n"
      "flag, there or on the command line, is an error. --v=1 logs in detail.\n"
      "Exit status: 0 success, 1 bad command line, 2 bad input or flag value,\n"
      "3 I/O failure or internal error, 128+N training stopped by signal N (SIGINT\n"
      "130, SIGTERM 143) after writing its checkpoint.\n";
  return text;
}

std::string VersionText() {
  std::string text = std::string("ember ") + EMBER_VERSION;
  const std::string commit = EMBER_GIT_COMMIT;
  if (!commit.empty()) text += " (git " + commit + ")";
  return text + "\n";
}

Result<std::string> CommandHelp(const std::string& command) {
  const Command* found = FindCommand(command);
  if (found == nullptr) {
    return Status::NotFound("'", command, "' is not a command (`ember help` lists them)");
  }
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::map<Topic, std::vector<const gflags::CommandLineFlagInfo*>> by_topic;
  for (const gflags::CommandLineFlagInfo& flag : flags) {
    if (Reads(command, flag)) by_topic[TopicOf(flag.name).first].push_back(&flag);
  }
  std::string text = std::string("ember ") + found->name + ": " + Indented(found->summary, 2) +
                     "\n\nusage: ember " + found->name + " [--flag=value ...] [--flagfile=FILE]\n";
  for (auto& [topic, members] : by_topic) {
    std::sort(members.begin(), members.end(), [](const auto* a, const auto* b) {
      return std::pair(TopicOf(a->name).second, a->name) <
             std::pair(TopicOf(b->name).second, b->name);
    });
    text += std::string("\n") + TopicTitle(topic) + ":\n";
    for (const gflags::CommandLineFlagInfo* flag : members) text += FlagLine(*flag);
  }
  return text;
}

std::string ReadableFlagValue(const std::string& type, const std::string& value) {
  if (type == "double") {
    char* end = nullptr;
    const double parsed = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0') return value;
    char buffer[64];
    const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), parsed);
    if (ec != std::errc()) return value;
    return std::string(buffer, ptr);
  }
  if (type == "string" && (value.empty() || value.find_first_of(" \t") != std::string::npos)) {
    return "\"" + value + "\"";
  }
  return value;
}

std::string WrapText(const std::string& text, int indent, int width) {
  const size_t room = static_cast<size_t>(std::max(width - indent, 20));
  std::string out;
  size_t line_length = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const size_t word_length = end - start;
    if (word_length > 0) {
      if (line_length > 0 && line_length + 1 + word_length > room) {
        out += '\n';
        out.append(indent, ' ');
        line_length = 0;
      }
      if (line_length > 0) {
        out += ' ';
        ++line_length;
      }
      out.append(text, start, word_length);
      line_length += word_length;
    }
    start = end + 1;
  }
  return out;
}

}  // namespace ember::tools
