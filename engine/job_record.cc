#include "engine/job_record.h"

#include <memory>
#include <optional>
#include <string>

#include "core/file.h"
#include "core/json.h"
#include "engine/bundle.h"
#include "engine/bundle_delta.h"
#include "engine/trainer.h"

namespace ember::engine {

namespace {

constexpr auto kDataShapeFields = [](auto& s, auto&& field) {
  field("num_dense", s.num_dense);
  field("num_slots", s.num_slots);
  field("num_labels", s.num_labels);
};

}  // namespace

void to_json(Json& j, const DataShape& s) { WriteJsonFields(j, s, kDataShapeFields); }
void from_json(const Json& j, DataShape& s) { ReadJsonFields(j, s, kDataShapeFields); }

void to_json(Json& j, const JobRecord& r) {
  j = Json{{"version", kJobRecordVersion},
           {"model", r.model},
           {"table", r.table},
           {"dense_optimizer", r.dense_optimizer},
           {"seed", r.seed},
           {"batch_size", r.batch_size},
           {"input", r.input},
           {"columnar_input", r.columnar_input},
           {"shape", r.shape},
           {"layout", r.layout}};
}

void from_json(const Json& j, JobRecord& r) {
  JsonFields f(j);
  int version = 0;
  f.Get("version", &version);
  if (version != kJobRecordVersion) {
    throw JsonFieldError("version", "is " + std::to_string(version) + "; this Ember reads " +
                                        std::to_string(kJobRecordVersion));
  }
  f.Get("model", &r.model);
  f.Get("table", &r.table);
  f.Get("dense_optimizer", &r.dense_optimizer);
  f.Get("seed", &r.seed);
  f.Get("batch_size", &r.batch_size);
  f.Get("input", &r.input);
  f.Get("columnar_input", &r.columnar_input);
  f.Get("shape", &r.shape);
  f.Optional("layout", &r.layout);
  f.Done();
}

JobRecord JobRecordOf(const TrainOptions& options, const io::FormatSpec& input,
                      bool columnar_input) {
  JobRecord record;
  record.model = options.model;
  record.model.device = Device::Cpu();
  record.table = options.table;
  record.dense_optimizer = options.dense_optimizer;
  record.seed = options.seed;
  record.batch_size = options.batch_size;
  record.input = input;
  record.columnar_input = columnar_input;
  record.shape = {options.model.num_dense, options.model.num_slots, options.model.num_tasks};
  return record;
}

std::string JobRecordPath(const std::string& checkpoint_dir) {
  return checkpoint_dir + "/job.json";
}

Status WriteJobRecord(const std::string& checkpoint_dir, const JobRecord& record) {
  return WriteFileAtomic(JobRecordPath(checkpoint_dir), Json(record).dump(2) + "\n");
}

Result<JobRecord> ReadJobRecord(const std::string& checkpoint_dir) {
  const std::string path = JobRecordPath(checkpoint_dir);
  if (!FileExists(path)) return Status::NotFound(path, ": no job record");
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  Result<Json> json = ParseJsonText(text);
  if (!json.ok()) return Status::DataLoss(path, ": ", json.status().message());
  Result<JobRecord> record = FromJson<JobRecord>(*json);
  if (!record.ok()) return Status::DataLoss(path, ": ", record.status().message());
  return record;
}

TrainOptions RestoreOptionsOf(const JobRecord& record, const std::string& checkpoint_dir) {
  TrainOptions options;
  options.model = record.model;
  options.table = record.table;
  options.table.memory_budget_bytes = 0;
  options.table.disk_path.clear();
  options.dense_optimizer = record.dense_optimizer;
  options.seed = record.seed;
  options.batch_size = record.batch_size;
  options.show_progress = false;
  options.checkpoint.dir = checkpoint_dir;
  return options;
}

Result<ExportedCheckpoint> ExportRecordedJob(const JobRecord& record,
                                             const std::string& checkpoint_dir,
                                             const std::string& bundle,
                                             const std::string& delta_base) {
  std::optional<BundleRowPrints> base;
  if (!delta_base.empty()) {
    Result<BundleRowPrints> read = ReadBundleRowPrints(delta_base);
    if (!read.ok()) return read.status().WithContext("the delta's base " + delta_base);
    base = *std::move(read);
  }
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<Trainer> trainer,
      Trainer::Create(RestoreOptionsOf(record, checkpoint_dir), record.shape.num_dense,
                      record.shape.num_slots, record.shape.num_labels));
  Result<int64_t> step = trainer->Restore();
  if (!step.ok()) return step.status().WithContext(checkpoint_dir);
  const BundleConfig config =
      BundleConfigOf(trainer->options(), record.input, record.columnar_input, *step);
  if (!base) {
    EMBER_RETURN_IF_ERROR(
        WriteBundle(bundle, config, trainer->model(), trainer->table()).WithContext(bundle));
    return ExportedCheckpoint{config.model.name, *step, trainer->table().num_rows()};
  }
  EMBER_RETURN_IF_ERROR(WriteDeltaBundle(bundle, config, trainer->model(), trainer->table(), *base)
                            .WithContext(bundle));
  EMBER_ASSIGN_OR_RETURN(const VerifiedBundle written, VerifyBundle(bundle));
  return ExportedCheckpoint{config.model.name, *step, trainer->table().num_rows(),
                            written.delta.changed_rows, written.delta.removed_rows};
}

Result<ExportedCheckpoint> ExportCheckpoint(const std::string& checkpoint_dir,
                                            const std::string& bundle,
                                            const std::string& delta_base) {
  EMBER_ASSIGN_OR_RETURN(const JobRecord record, ReadJobRecord(checkpoint_dir));
  return ExportRecordedJob(record, checkpoint_dir, bundle, delta_base);
}

}  // namespace ember::engine
