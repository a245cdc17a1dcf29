#include "engine/train_options.h"

#include "core/threads.h"
#include "engine/model_zoo.h"

namespace ember::engine {

int JobThreads(const TrainOptions& options) {
  return options.threads > 0 ? options.threads : HardwareThreads();
}

Status ValidateRankGroup(const RankGroup& group) {
  const Communicator* all[] = {group.pull, group.push, group.dense, group.control};
  const char* names[] = {"pull", "push", "dense", "control"};
  for (int i = 0; i < 4; ++i) {
    if ((all[i] == nullptr) != (group.pull == nullptr)) {
      return Status::InvalidArgument("rank group: the ", names[i], " communicator is ",
                                     all[i] == nullptr ? "missing" : "set without the others");
    }
    if (all[i] != nullptr &&
        (all[i]->rank() != group.pull->rank() || all[i]->size() != group.pull->size())) {
      return Status::InvalidArgument("rank group: the ", names[i], " communicator is rank ",
                                     all[i]->rank(), " of ", all[i]->size(), ", the pull one ",
                                     group.pull->rank(), " of ", group.pull->size());
    }
  }
  for (const Communicator* optional : {group.data, group.gradients}) {
    if (optional != nullptr &&
        (group.pull == nullptr || optional->rank() != group.pull->rank() ||
         optional->size() != group.pull->size())) {
      return Status::InvalidArgument("rank group: the ",
                                     optional == group.data ? "data" : "gradients",
                                     " communicator is not of the others' ranks");
    }
  }
  return Status::OK();
}

Status ValidateTrainOptions(const TrainOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckModelName(o.model.name));
  EMBER_RETURN_IF_ERROR(ValidateRankGroup(o.ranks));
  if (o.dense_bucket_bytes < 0) {
    return Status::InvalidArgument("dense_bucket_bytes is ", o.dense_bucket_bytes,
                                   " (0: no buckets)");
  }
  if (o.batch_size < 1) return Status::InvalidArgument("--batch_size must be >= 1, got ", o.batch_size);
  if (o.epochs < 1) return Status::InvalidArgument("--epochs must be >= 1, got ", o.epochs);
  if (o.max_steps < 0) return Status::InvalidArgument("--max_steps must be >= 0, got ", o.max_steps);
  if (o.timing_warmup_steps < 0) {
    return Status::InvalidArgument("--timing_warmup_steps must be >= 0, got ",
                                   o.timing_warmup_steps);
  }
  if (o.eval_batch_size < 1) {
    return Status::InvalidArgument("eval batch size must be >= 1, got ", o.eval_batch_size);
  }
  if (!(o.table.optimizer.learning_rate > 0)) {
    return Status::InvalidArgument("--sparse_lr must be > 0, got ", o.table.optimizer.learning_rate);
  }
  if (o.table.ttl_steps < 0) {
    return Status::InvalidArgument("--embedding_ttl_steps must be >= 0, got ", o.table.ttl_steps);
  }
  if (!(o.dense_optimizer.learning_rate > 0)) {
    return Status::InvalidArgument("--dense_lr must be > 0, got ", o.dense_optimizer.learning_rate);
  }
  EMBER_RETURN_IF_ERROR(pipeline::ValidateTrainingLoopOptions(o.pipeline, JobThreads(o)));
  if (o.pipeline_parallel.active()) {
    EMBER_RETURN_IF_ERROR(pipeline::ValidatePipelineParallelOptions(o.pipeline_parallel));
    if (o.ranks.active() && o.pipeline_parallel.ranks > 1) {
      return Status::InvalidArgument(
          "--pipeline_parallel: every rank of the job is a stage of one pipeline; data "
          "parallelism across pipelines is not supported yet");
    }
  }
  if (o.embedding_reserve_rows < -1) {
    return Status::InvalidArgument("--embedding_reserve_rows must be >= -1 (-1: auto), got ",
                                   o.embedding_reserve_rows);
  }
  if (o.checkpoint.every_steps < 0) {
    return Status::InvalidArgument("--checkpoint_every_steps must be >= 0, got ",
                                   o.checkpoint.every_steps);
  }
  if (o.eval_every_steps < 0) {
    return Status::InvalidArgument("--eval_every_steps must be >= 0, got ", o.eval_every_steps);
  }
  if (o.checkpoint.full_every < 1) {
    return Status::InvalidArgument("--checkpoint_full_every must be >= 1, got ",
                                   o.checkpoint.full_every);
  }
  return Status::OK();
}

}  // namespace ember::engine
