#pragma once

// The flags a checkpointed job resumes with. A resume gives the result of an
// uninterrupted run only with the flags that decide that result (the model,
// the data and how it is read, the seed, the optimizers, the table, ...), so
// the first run of a job records them in its checkpoint directory, as a
// flagfile, and a resume with any of them changed is refused, naming each.
// Flags that say how long to train (--max_steps, --epochs), where outputs go,
// how often to checkpoint, and how the work is spread over threads, stages
// and memory tiers (which leave the result as it is: the determinism and
// equivalence tests) may change; kMayChangeOnResume lists them.

#include <string>
#include <vector>

#include "core/json_fwd.h"
#include "core/status.h"

namespace ember::tools {

// Names of the flags a resume may change.
extern const std::vector<std::string> kMayChangeOnResume;

// "<checkpoint_dir>/job.flags": one --name=value line per recorded flag (a
// flagfile: `ember train --flagfile=<dir>/job.flags` runs the job again).
std::string JobFlagsPath(const std::string& checkpoint_dir);

// Writes the effective values of the flags of `flag_files` (see
// EffectiveFlags) but those of kMayChangeOnResume, atomically. IOError
// naming the file on failure.
Status RecordJobFlags(const std::string& checkpoint_dir, const std::vector<std::string>& flag_files);

// InvalidArgument naming every recorded flag whose effective value now
// differs (with both values), or that this build no longer has. OK when
// there is no record (a checkpoint of an older Ember; a warning says so).
// DataLoss naming the file if it is malformed.
Status CheckResumeFlags(const std::string& checkpoint_dir,
                        const std::vector<std::string>& flag_files);

// What a job's flags do not say about its input and `ember export` needs to
// rebuild its model and bundle once the training data may be gone: the
// examples' shape and whether training read columnar files (the text format
// is in the flags).
struct JobInput {
  int num_dense = 0;
  int num_slots = 0;
  int num_labels = 1;
  bool columnar = false;
};
// JSON {num_dense, num_slots, num_labels, columnar}; read, counts are
// integers (num_labels at least 1).
void to_json(Json& j, const JobInput& input);
void from_json(const Json& j, JobInput& input);

// "<checkpoint_dir>/job.input": a JSON object with the fields of JobInput.
std::string JobInputPath(const std::string& checkpoint_dir);

// Writes `input` atomically. IOError naming the file on failure.
Status RecordJobInput(const std::string& checkpoint_dir, const JobInput& input);

// The recorded input of the job in `checkpoint_dir`. NotFound when there is
// no record (a checkpoint of an older Ember); DataLoss naming the file if it
// is malformed.
Result<JobInput> ReadJobInput(const std::string& checkpoint_dir);

}  // namespace ember::tools
