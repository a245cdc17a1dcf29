#pragma once

// The ranks of a training job that mpirun started (issue 31):
//
//   mpirun -np 4 ember train --flagfile=job.flags
//
// Each process is one rank. It joins the others over MPI (core/
// mpi_communicator.h) with a communicator per thread that talks to them
// (pull, push, dense stages and the trainer's own thread: RankGroup),
// checks that every rank was started with the same settings, and gathers
// what one rank writes for the job (the model hash, the serving bundle) from
// the others. Without mpirun the job is one rank and nothing of this runs.
// engine/job.h starts a job on them; a library caller may too.

#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/heartbeat.h"
#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/train_options.h"

namespace ember::engine {

class JobRanks {
 public:
  // Joins the job's ranks when mpirun started this process (see InitMpi);
  // otherwise returns a job of one rank. Every blocking exchange waits for
  // the other ranks at most `timeout_seconds`, then fails naming the ranks
  // that did not answer.
  static Result<std::unique_ptr<JobRanks>> Join(double timeout_seconds);
  ~JobRanks();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool several() const { return size_ > 1; }
  // The communicators for the trainer; empty for one rank.
  RankGroup group() const;

  // The communicators of a pipeline over the job's ranks (pipeline/
  // pipeline_parallel.h): its stages' (the dense stage's), and its commands',
  // whose waits are bounded by rank 0's heartbeat (core/heartbeat.h): the
  // other ranks wait for rank 0's next command as long as rank 0 reads,
  // evaluates or checkpoints, and fail `timeout_seconds` after rank 0 falls
  // silent (stopped or killed), naming it. Null for one rank.
  Communicator* pipeline_stages() const { return dense_.get(); }
  Communicator* pipeline_commands() const { return commands_.get(); }

  // One setting of a job, as the ranks compare them: a flag's name and value.
  struct Setting {
    std::string name;
    std::string value;
  };
  // InvalidArgument on every rank unless every rank runs with the same
  // `settings` (name and value), naming the first that differs ("--name"),
  // a rank that has it and the value of each side. A collective.
  Status CheckSameSettings(const std::vector<Setting>& settings);

  // Every rank's stored rows of `table` (a sharded table made with
  // `options`: each rank holds its own) in one in-memory table on rank 0, for
  // what rank 0 writes for the whole job; null on the other ranks. A
  // collective. Holds the whole table in rank 0's memory.
  Result<std::unique_ptr<embedding::EmbeddingTable>> GatherTable(
      embedding::EmbeddingTable& table, const embedding::EmbeddingTableOptions& options);

  // The sum of every rank's `value` (a collective; `value` alone for one
  // rank).
  Result<int64_t> SumOverRanks(int64_t value);

  // For a dense model on cuda:`device`: the dense stage's communicator (the
  // data-parallel all-reduce, or a pipeline's stages) goes over NCCL (its id
  // broadcast over MPI) instead of MPI. A collective; does nothing for one
  // rank. (Compiled here; not yet run on GPUs.)
  Status UseNcclForDense(int device, double timeout_seconds);

  // Leaves the job after a failure: the other ranks' exchanges with this
  // one fail at once, naming it and `reason`.
  void Abort(const Status& reason);

 private:
  JobRanks() = default;

  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<Communicator> pull_, push_, dense_, control_, data_, gradients_, commands_,
      heartbeats_;
  // Rank 0's heartbeat: sent by rank 0, watched by the others, whose
  // communicators it aborts when rank 0 falls silent. Destroyed first.
  std::unique_ptr<Heartbeat> heartbeat_;
};

// Ends MPI after a job's last JobRanks is gone, when the job finished
// without error; a failed rank exits without it (mpirun then ends the
// others). Does nothing without mpirun.
Status FinishJobRanks();

}  // namespace ember::engine
