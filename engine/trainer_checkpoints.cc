// The trainer's checkpoints: restoring the newest (or the job of ranks'
// commit, resharded when another number of ranks wrote it), saving one
// between steps, and skipping the batches a restored checkpoint had trained.
#include <string>
#include <vector>

#include "core/trace.h"
#include "engine/rank_checkpoint.h"
#include "engine/reshard_checkpoint.h"
#include "engine/trainer.h"

namespace ember::engine {

namespace {

// The dense half's state for a checkpoint. A model on a GPU gives host
// copies of its parameters, kept in `*host` (a restore into them is copied
// back with ParametersFromHost).
Result<DenseState> DenseStateOf(DenseModel& model, const std::string& model_name,
                                const ops::DenseOptimizerOptions& optimizer,
                                int64_t* optimizer_steps, std::string* data_position,
                                std::vector<Parameter>* host) {
  DenseState state;
  state.data_position = data_position;
  if (model.device().is_cpu()) {
    state.parameters = model.parameters();
  } else {
    EMBER_ASSIGN_OR_RETURN(*host, model.ParametersToHost());
    for (Parameter& p : *host) state.parameters.push_back(&p);
  }
  state.descriptor = DenseStateDescriptor(model_name,
                                          ops::DenseOptimizerName(optimizer.type), state.parameters);
  state.optimizer_steps = optimizer_steps;
  return state;
}

}  // namespace

Result<int64_t> Trainer::Restore() {
  if (checkpointer_ == nullptr) {
    return Status::FailedPrecondition("no checkpoint directory is set");
  }
  std::vector<Parameter> host;
  EMBER_ASSIGN_OR_RETURN(
      const DenseState dense,
      DenseStateOf(*model_, options_.model.name, options_.dense_optimizer,
                   step_.optimizer_steps(), &resume_position_, &host));
  EMBER_ASSIGN_OR_RETURN(const int64_t step,
                         options_.ranks.active() || ranks_layout_ ? RestoreRanks(dense)
                                                                 : checkpointer_->Restore(dense));
  if (!model_->device().is_cpu()) EMBER_RETURN_IF_ERROR(model_->ParametersFromHost(host));
  if (pipeline_stage_) EMBER_RETURN_IF_ERROR(pipeline_stage_->CopyParametersFrom(*model_));
  job_steps_ = step;
  skip_batches_ = step;
  restored_step_ = step;
  return step;
}

Result<int64_t> Trainer::NewestCheckpointStep() const {
  if (checkpointer_ == nullptr) return int64_t{-1};
  if (!options_.ranks.active() && !ranks_layout_) return checkpointer_->NewestStep();
  Result<RanksRecord> record = FindRanksCheckpoint(job_checkpoint_dir_);
  if (!record.ok() && record.status().code() == StatusCode::kNotFound) return int64_t{-1};
  EMBER_RETURN_IF_ERROR(record.status());
  return record->step;
}

Result<int64_t> Trainer::RestoreRanks(const DenseState& dense) {
  EMBER_ASSIGN_OR_RETURN(const RanksRecord record, FindRanksCheckpoint(job_checkpoint_dir_));
  const int ranks = options_.ranks.size(), rank = options_.ranks.rank();
  if (record.ranks == ranks && !record.unranked) {
    return checkpointer_->RestoreAt(record.step, dense);
  }
  return ReshardRanksCheckpoint(job_checkpoint_dir_, record,
                                {rank, ranks, options_.batch_size, options_.checkpoint,
                                 options_.table},
                                *table_, dense);
}

Status Trainer::SaveCheckpoint(int64_t step, const std::string& data_position,
                               TrainReport* report) {
  TraceSpan span(options_.pipeline.tracer, "checkpoint", "checkpoint", step);
  if (pipeline_stage_) EMBER_RETURN_IF_ERROR(pipeline_stage_->CopyParametersTo(*model_));
  std::string position = data_position;
  std::vector<Parameter> host;
  EMBER_ASSIGN_OR_RETURN(const DenseState dense,
                         DenseStateOf(*model_, options_.model.name, options_.dense_optimizer,
                                      step_.optimizer_steps(), &position, &host));
  if (ranks_layout_ && !uncommitted_set_aside_) {
    // What this rank saved after the job's last commit (a job killed
    // between its ranks' saves and RANKS) is not the job's: out of the way
    // of the saves to come.
    EMBER_RETURN_IF_ERROR(checkpointer_->SetAsideAfter(restored_step_));
    uncommitted_set_aside_ = true;
  }
  EMBER_RETURN_IF_ERROR(checkpointer_->Save(step, dense)
                            .WithContext("writing the checkpoint of step " + std::to_string(step) +
                                         " in " + checkpointer_->dir()));
  if (ranks_layout_) {
    EMBER_RETURN_IF_ERROR(CommitRanksCheckpoint(options_.ranks.control, job_checkpoint_dir_, step));
  }
  ++report->checkpoints_written;
  report->last_checkpoint_step = step;
  return Status::OK();
}


Status Trainer::SkipTrainedBatches(io::BatchSource& train, int64_t skip,
                                   const std::string& position, bool* exhausted) {
  // The source seeks to where the checkpoint's batches ended, or, when it
  // cannot (or the checkpoint has no position), those batches are read and
  // dropped; either way training goes on with the batch after them.
  const Status seek =
      position.empty() ? Status::Unimplemented("no position") : train.ResumeFrom(position);
  if (seek.ok()) {
    LOG(INFO) << "resuming after step " << skip << " where its data ended";
    return Status::OK();
  }
  if (seek.code() != StatusCode::kUnimplemented) {
    return seek.WithContext(
        "the checkpoint's training data position does not fit this training data (resume "
        "with the data and reader flags of the checkpointed job, or start afresh)");
  }
  LOG(INFO) << "resuming after step " << skip << ": skipping the batches it had trained";
  io::Batch scratch;
  for (int64_t i = 0; i < skip && !*exhausted; ++i) {
    Result<bool> more = train.Next(&scratch);
    if (!more.ok()) return more.status().WithContext("skipping trained batches");
    *exhausted = !*more;
  }
  return Status::OK();
}

}  // namespace ember::engine
