// `ember export`: the serving bundle (engine/bundle.h) of a training job's
// newest checkpoint, its configuration taken from the job's recorded flags.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/file.h"
#include "engine/bundle.h"
#include "engine/model_zoo.h"
#include "engine/trainer.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/job_flags.h"
#include "tools/serving_flags.h"
#include "tools/train_flags.h"

namespace ember::tools {
namespace {

// The examples' shape of the job: that of its training files, or of the
// data it generated.
struct Shape {
  int num_dense = 0;
  int num_slots = 0;
  int num_labels = 1;
};

Result<Shape> JobShape() {
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                         ExpandPathList("train_data", FLAGS_train_data));
  if (paths.empty()) {
    EMBER_ASSIGN_OR_RETURN(const io::SyntheticOptions synthetic, SyntheticOptionsFromFlags());
    const int tasks = FLAGS_tasks == 0 ? engine::DefaultTaskCount(FLAGS_model) : FLAGS_tasks;
    return Shape{synthetic.num_dense, synthetic.num_slots, tasks};
  }
  io::StreamReaderOptions options;
  options.threads = 1;
  Result<InputStream> input = OpenInputStream(paths, options);
  if (!input.ok()) {
    return input.status().WithContext(
        "the job's --train_data (read for the examples' shape; the checkpoint does not record "
        "it)");
  }
  return Shape{input->reader->num_dense(), input->reader->num_slots(),
               input->reader->num_labels()};
}

Status Export() {
  if (FLAGS_checkpoint_dir.empty()) return Status::InvalidArgument("--checkpoint_dir is required");
  if (FLAGS_bundle.empty()) return Status::InvalidArgument("--bundle is required");
  // The job's flags, as its first run recorded them, configure the model.
  const std::string job_flags = JobFlagsPath(FLAGS_checkpoint_dir);
  Result<std::string> recorded = ReadFile(job_flags);
  if (!recorded.ok()) {
    return recorded.status().WithContext(
        "--checkpoint_dir=" + FLAGS_checkpoint_dir +
        " (a checkpoint directory of `ember train` holds job.flags)");
  }
  if (!gflags::ReadFlagsFromString(*recorded, "ember", /*errors_are_fatal=*/false)) {
    return Status::DataLoss(job_flags, ": holds flags this Ember does not read");
  }
  LogEffectiveFlags({"tools/train_command.cc", "tools/format_flags.cc"});
  EMBER_ASSIGN_OR_RETURN(engine::TrainOptions options, TrainOptionsFromFlags());
  options.show_progress = false;
  options.checkpoint.dir = FLAGS_checkpoint_dir;
  EMBER_ASSIGN_OR_RETURN(const Shape shape, JobShape());
  EMBER_ASSIGN_OR_RETURN(auto trainer, engine::Trainer::Create(options, shape.num_dense,
                                                               shape.num_slots, shape.num_labels));
  Result<int64_t> step = trainer->Restore();
  if (!step.ok()) return step.status().WithContext("--checkpoint_dir=" + FLAGS_checkpoint_dir);
  EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> train_paths,
                         ExpandPathList("train_data", FLAGS_train_data));
  bool columnar = false;
  EMBER_ASSIGN_OR_RETURN(const io::FormatSpec input, TrainingInputSpec(train_paths, &columnar));
  const engine::BundleConfig config =
      engine::BundleConfigOf(trainer->options(), input, columnar, *step);
  EMBER_RETURN_IF_ERROR(
      engine::WriteBundle(FLAGS_bundle, config, trainer->model(), trainer->table())
          .WithContext("--bundle"));
  std::printf("exported the %s model of step %lld (%lld embedding rows) to %s\n",
              config.model.name.c_str(), static_cast<long long>(*step),
              static_cast<long long>(trainer->table().num_rows()), FLAGS_bundle.c_str());
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
