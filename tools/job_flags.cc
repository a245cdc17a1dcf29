#include "tools/job_flags.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>

#include "core/file.h"
#include "core/json.h"
#include "tools/commands.h"

namespace ember::tools {

const std::vector<std::string> kMayChangeOnResume = {
    // How long to train.
    "max_steps", "epochs",
    // Outputs, checkpoints and reporting.
    "checkpoint_dir", "checkpoint_every_steps", "resume", "metrics_out", "trace_file", "export_dir",
    "model_hash", "watchdog_seconds", "progress_seconds",
    // Placement of the work: bit for bit the same model (thread counts,
    // --pipeline with --max_staleness=0, the disk tier and its prefetch).
    "threads", "stage_threads", "plan", "recalibrate", "cluster", "pipeline", "read_ahead",
    "prefetch", "early_pulls", "embedding_memory_budget", "embedding_eviction", "embedding_dir",
    // The dense graph's split into pipeline stages (the same micro-batches
    // train the same bits however they are split).
    "pipeline_parallel", "virtual_stages", "pipeline_schedule",
    // Which rank holds which examples of data in memory (the same batches).
    "shard_in_memory_data",
    // How the dense gradients' all-reduce is cut up (the same sums).
    "dense_bucket_kib",
    // The layout over the ranks, which -np changes too (a resume reshards
    // the rows and the dense state to the new one; scheduler/layout.h), and
    // whether the experts divide (the same model either way).
    "mesh", "table_sharding", "expert_parallel",
    // Evaluation only.
    "test_data"};

void to_json(Json& j, const JobInput& input) {
  j = Json{{"num_dense", input.num_dense},
           {"num_slots", input.num_slots},
           {"num_labels", input.num_labels},
           {"columnar", input.columnar}};
}

// Fields this build does not know are ignored, as they always were.
void from_json(const Json& j, JobInput& input) {
  JsonFields f(j);
  const auto count = [&f](const char* key, int minimum, int* out) {
    f.Get(key, out);
    if (*out < minimum) {
      throw JsonFieldError(key, "is " + std::to_string(*out) + ", expected an integer >= " +
                                    std::to_string(minimum));
    }
  };
  count("num_dense", 0, &input.num_dense);
  count("num_slots", 0, &input.num_slots);
  count("num_labels", 1, &input.num_labels);
  f.Get("columnar", &input.columnar);
}

namespace {

bool MayChange(const std::string& name) {
  return std::find(kMayChangeOnResume.begin(), kMayChangeOnResume.end(), name) !=
         kMayChangeOnResume.end();
}

}  // namespace

std::string JobFlagsPath(const std::string& checkpoint_dir) {
  return checkpoint_dir + "/job.flags";
}

Status RecordJobFlags(const std::string& checkpoint_dir,
                      const std::vector<std::string>& flag_files) {
  std::string text =
      "# The flags of the job checkpointed here; a resume must repeat them (tools/job_flags.h).\n";
  for (const EffectiveFlag& flag : EffectiveFlags(flag_files)) {
    if (!MayChange(flag.name)) text += "--" + flag.name + "=" + flag.value + "\n";
  }
  return WriteFileAtomic(JobFlagsPath(checkpoint_dir), text);
}

Status CheckResumeFlags(const std::string& checkpoint_dir,
                        const std::vector<std::string>& flag_files) {
  const std::string path = JobFlagsPath(checkpoint_dir);
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound) return text.status();
    LOG(WARNING) << path << " is missing (a checkpoint of an older Ember): the resumed job's "
                 << "flags cannot be checked against the checkpointed job's";
    return Status::OK();
  }
  std::map<std::string, std::string> now;
  for (const EffectiveFlag& flag : EffectiveFlags(flag_files)) now[flag.name] = flag.value;
  std::string differences;
  int line_number = 0;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::string_view line(text->data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    const size_t equals = line.find('=');
    if (!line.starts_with("--") || equals == std::string_view::npos) {
      return Status::DataLoss(path, ":", line_number, ": expected --name=value");
    }
    const std::string name(line.substr(2, equals - 2));
    const std::string recorded(line.substr(equals + 1));
    if (MayChange(name)) continue;
    auto it = now.find(name);
    if (it == now.end()) {
      differences += "\n  --" + name + " (recorded as '" + recorded + "') is no longer a flag";
    } else if (it->second != recorded) {
      differences += "\n  --" + name + "=" + it->second + ", the checkpointed job had '" +
                     recorded + "'";
    }
  }
  if (differences.empty()) return Status::OK();
  return Status::InvalidArgument(
      "--checkpoint_dir ", checkpoint_dir, " holds a job with other flags; a resume with these "
      "would not give the model of an uninterrupted run:", differences,
      "\n(resume with the job's flags, e.g. --flagfile=", path,
      ", or start afresh with another --checkpoint_dir)");
}

std::string JobInputPath(const std::string& checkpoint_dir) {
  return checkpoint_dir + "/job.input";
}

Status RecordJobInput(const std::string& checkpoint_dir, const JobInput& input) {
  // The layout of earlier Embers: two-space indents, then an empty line.
  return WriteFileAtomic(JobInputPath(checkpoint_dir), JsonText(Json(input), 2) + "\n\n");
}

Result<JobInput> ReadJobInput(const std::string& checkpoint_dir) {
  const std::string path = JobInputPath(checkpoint_dir);
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  Result<Json> record = ParseJsonText(text);
  if (!record.ok()) return Status::DataLoss(path, ": ", record.status().message());
  Result<JobInput> input = FromJson<JobInput>(*record);
  if (!input.ok()) return Status::DataLoss(path, ": ", input.status().message());
  return input;
}

}  // namespace ember::tools
