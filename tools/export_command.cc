// `ember export`: the serving bundle (engine/bundle.h) of a training job's
// newest checkpoint, its configuration taken from the job's record
// (engine/job_record.h; for checkpoints older than records, from the job's
// recorded flags and input, tools/job_flags.h), so that the training data
// need not exist.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/file.h"
#include "engine/bundle.h"
#include "engine/job_record.h"
#include "engine/model_zoo.h"
#include "engine/trainer.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/job_flags.h"
#include "tools/model_flags.h"
#include "tools/serving_flags.h"
#include "tools/train_flags.h"

namespace ember::tools {
namespace {

// The job's input as its training data shows it, for a checkpoint that
// does not record it (tools/job_flags.h: written by an older Ember): the
// shape of its training files and their format, or of the data it
// generated.
Result<JobInput> JobInputFromData() {
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                         ExpandPathList("train_data", FLAGS_train_data));
  JobInput input;
  EMBER_RETURN_IF_ERROR(TrainingInputSpec(paths, &input.columnar).status());
  if (paths.empty()) {
    EMBER_ASSIGN_OR_RETURN(const io::SyntheticOptions synthetic, SyntheticOptionsFromFlags());
    input.num_dense = synthetic.num_dense;
    input.num_slots = synthetic.num_slots;
    input.num_labels = FLAGS_tasks == 0 ? engine::DefaultTaskCount(ModelFlag()) : FLAGS_tasks;
    return input;
  }
  io::StreamReaderOptions options;
  options.threads = 1;
  EMBER_ASSIGN_OR_RETURN(InputStream stream, OpenInputStream(paths, options));
  input.num_dense = stream.reader->num_dense();
  input.num_slots = stream.reader->num_slots();
  input.num_labels = stream.reader->num_labels();
  return input;
}

// The job's input: as its checkpoint directory records it, else from its
// training data.
Result<JobInput> JobInputOf(const std::string& checkpoint_dir) {
  Result<JobInput> recorded = ReadJobInput(checkpoint_dir);
  if (recorded.ok() || recorded.status().code() != StatusCode::kNotFound) return recorded;
  Result<JobInput> from_data = JobInputFromData();
  if (!from_data.ok()) {
    return from_data.status().WithContext(
        "--checkpoint_dir=" + checkpoint_dir + " has no " + JobInputPath(checkpoint_dir) +
        " (a checkpoint of an older Ember), so the examples' shape must come from the job's "
        "--train_data, which cannot be read");
  }
  return from_data;
}

// A checkpoint written before job records (engine/job_record.h): the job's
// flags, as its first run recorded them, configure the model.
Result<engine::ExportedCheckpoint> ExportFromRecordedFlags() {
  const std::string job_flags = JobFlagsPath(FLAGS_checkpoint_dir);
  Result<std::string> recorded = ReadFile(job_flags);
  if (!recorded.ok()) {
    return recorded.status().WithContext(
        "--checkpoint_dir=" + FLAGS_checkpoint_dir +
        " (a checkpoint directory of `ember train` holds job.json or job.flags)");
  }
  if (!gflags::ReadFlagsFromString(*recorded, "ember", /*errors_are_fatal=*/false)) {
    return Status::DataLoss(job_flags, ": holds flags this Ember does not read");
  }
  LogEffectiveFlags({"tools/train_flags.cc", "tools/model_flags.cc", "tools/format_flags.cc"});
  EMBER_ASSIGN_OR_RETURN(const engine::TrainOptions options, TrainOptionsFromFlags());
  EMBER_ASSIGN_OR_RETURN(const JobInput input, JobInputOf(FLAGS_checkpoint_dir));
  EMBER_ASSIGN_OR_RETURN(const io::FormatSpec spec,
                         RecordedTrainingInputSpec(/*generated_data=*/FLAGS_train_data.empty()));
  // The record the job would have written, from its flags and input.
  engine::JobRecord record = engine::JobRecordOf(options, spec, input.columnar);
  record.shape = {input.num_dense, input.num_slots, input.num_labels};
  return engine::ExportRecordedJob(record, FLAGS_checkpoint_dir, FLAGS_bundle, FLAGS_delta_base);
}

Status Export() {
  if (FLAGS_checkpoint_dir.empty()) return Status::InvalidArgument("--checkpoint_dir is required");
  if (FLAGS_bundle.empty()) return Status::InvalidArgument("--bundle is required");
  // The job's record configures the model: no flags of the job are read.
  Result<engine::ExportedCheckpoint> exported =
      FileExists(engine::JobRecordPath(FLAGS_checkpoint_dir))
          ? engine::ExportCheckpoint(FLAGS_checkpoint_dir, FLAGS_bundle, FLAGS_delta_base)
          : ExportFromRecordedFlags();
  if (!exported.ok()) return exported.status();
  if (exported->changed_rows >= 0) {
    std::printf("exported the delta of the %s model of step %lld against %s (%lld rows changed, "
                "%lld removed, of %lld) to %s\n",
                exported->model.c_str(), static_cast<long long>(exported->step),
                FLAGS_delta_base.c_str(), static_cast<long long>(exported->changed_rows),
                static_cast<long long>(exported->removed_rows),
                static_cast<long long>(exported->rows), FLAGS_bundle.c_str());
    return Status::OK();
  }
  std::printf("exported the %s model of step %lld (%lld embedding rows) to %s\n",
              exported->model.c_str(), static_cast<long long>(exported->step),
              static_cast<long long>(exported->rows), FLAGS_bundle.c_str());
  return Status::OK();
}

}  // namespace

int RunExport() {
  const Status status = Export();
  if (!status.ok()) {
    std::fprintf(stderr, "ember export: %s\n", status.ToString().c_str());
    return ExitCodeFor(status);
  }
  return kExitOk;
}

}  // namespace ember::tools
