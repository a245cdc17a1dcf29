// engine::Job and the job record (engine/job.h, engine/job_record.h): a job
// run as a library value trains what the trainer trains, and a checkpoint's
// record exports it with no flags and no data.
#include "engine/job.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/json.h"
#include "engine/bundle.h"
#include "engine/job_record.h"
#include "engine/model_hash.h"
#include "engine/scorer.h"
#include "engine/training_data.h"
#include "tests/engine/score_all.h"
#include "tests/engine/trainer_test_util.h"

namespace ember::engine {
namespace {

class JobTest : public test::TrainerTest {};

JobRecord SampleRecord() {
  TrainOptions options;
  options.model.name = "dcn_v2";
  options.model.top_mlp = {32, 8};
  options.model.params.Set("cross_layers", 2);
  options.model.num_dense = 13;
  options.model.num_slots = 26;
  options.table.dim = 8;
  options.table.seed = 77;
  options.table.optimizer.type = embedding::SparseOptimizer::kFtrl;
  options.table.optimizer.learning_rate = 0.03f;
  options.table.optimizer.l1 = 0.25f;
  options.table.admission.kind = embedding::AdmissionOptions::Kind::kFrequency;
  options.table.admission.min_count = 3;
  options.table.weight_storage = embedding::WeightStorage::kBFloat16;
  options.table.eviction_policy = embedding::EmbeddingTableOptions::EvictionPolicy::kLfu;
  options.dense_optimizer.type = ops::DenseOptimizer::kSgd;
  options.dense_optimizer.learning_rate = 0.125f;
  options.seed = 18446744073709551557ull;
  options.batch_size = 96;
  io::FormatSpec input;
  input.name = "csv";
  input.schema = "label,dense*13,cat*26";
  return JobRecordOf(options, input, /*columnar_input=*/false);
}

TEST_F(JobTest, ARecordReadsBackToTheSameOptions) {
  const JobRecord record = SampleRecord();
  ASSERT_TRUE(WriteJobRecord(Path(""), record).ok());
  Result<JobRecord> read = ReadJobRecord(Path(""));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(Json(record).dump(), Json(*read).dump());
  EXPECT_EQ("dcn_v2", read->model.name);
  EXPECT_EQ(embedding::SparseOptimizer::kFtrl, read->table.optimizer.type);
  EXPECT_EQ(0.03f, read->table.optimizer.learning_rate);
  EXPECT_EQ(embedding::WeightStorage::kBFloat16, read->table.weight_storage);
  EXPECT_EQ(embedding::EmbeddingTableOptions::EvictionPolicy::kLfu, read->table.eviction_policy);
  EXPECT_EQ(ops::DenseOptimizer::kSgd, read->dense_optimizer.type);
  EXPECT_EQ(18446744073709551557ull, read->seed);
  EXPECT_EQ(96, read->batch_size);
  EXPECT_EQ("csv", read->input.name);
  EXPECT_EQ(26, read->shape.num_slots);
}

TEST_F(JobTest, ADamagedRecordIsDataLossNamingTheFileAndTheField) {
  EXPECT_EQ(StatusCode::kNotFound, ReadJobRecord(Path("")).status().code());
  Json json = SampleRecord();
  json["table"]["optimizer"].erase("l1");
  ASSERT_TRUE(WriteFileAtomic(JobRecordPath(Path("")), json.dump()).ok());
  Status status = ReadJobRecord(Path("")).status();
  EXPECT_EQ(StatusCode::kDataLoss, status.code());
  EXPECT_NE(std::string::npos, status.message().find("job.json")) << status;
  EXPECT_NE(std::string::npos, status.message().find("\"table.optimizer.l1\" is missing"))
      << status;
  json = SampleRecord();
  json["table"]["weight_storage"] = "f8";
  ASSERT_TRUE(WriteFileAtomic(JobRecordPath(Path("")), json.dump()).ok());
  status = ReadJobRecord(Path("")).status();
  EXPECT_NE(std::string::npos, status.message().find("\"table.weight_storage\" is invalid"))
      << status;
  json = SampleRecord();
  json["version"] = 2;
  ASSERT_TRUE(WriteFileAtomic(JobRecordPath(Path("")), json.dump()).ok());
  EXPECT_EQ(StatusCode::kDataLoss, ReadJobRecord(Path("")).status().code());
}

// A job run through its steps as a library caller would trains the model
// Trainer::Fit trains, and its checkpoint exports from the record alone to
// a bundle that scores as one written from the trainer.
TEST_F(JobTest, AJobOfStepsTrainsTheTrainersModelAndExportsFromItsRecord) {
  Result<io::Dataset> data = SyntheticData(3000);
  ASSERT_TRUE(data.ok()) << data.status();
  const io::Dataset train = data->Slice(0, 2500), test = data->Slice(2500, 3000);
  TrainOptions options = SmallOptions();
  options.epochs = 2;
  std::string expected_hash;
  {
    auto trainer = Trainer::Create(options, train.num_dense(), train.num_slots());
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ASSERT_TRUE((*trainer)->Fit(train).ok());
    Result<uint64_t> hash = HashTrainedModel((*trainer)->model(), (*trainer)->table());
    ASSERT_TRUE(hash.ok()) << hash.status();
    expected_hash = ModelHashHex(*hash);
  }
  JobOptions job_options;
  job_options.train = options;
  job_options.train.checkpoint.dir = Path("ck");
  job_options.outputs.export_dir = Path("bundle");
  job_options.outputs.model_hash = true;
  {
    Result<std::unique_ptr<Job>> job = Job::Join(job_options);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_TRUE((*job)->CheckOutputs().ok());
    ASSERT_FALSE((*job)->serves_pipeline());
    ASSERT_TRUE((*job)->Create({train.num_dense(), train.num_slots(), 1}).ok());
    Result<int64_t> resumed = (*job)->Resume();
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(-1, *resumed);
    ASSERT_TRUE(WriteJobRecord(Path("ck"), JobRecordOf((*job)->trainer().options(),
                                                       io::FormatSpec{}, false))
                    .ok());
    Result<std::unique_ptr<io::BatchSource>> source =
        NewDatasetTrainingSource(train, (*job)->trainer().options());
    ASSERT_TRUE(source.ok()) << source.status();
    Result<TrainReport> report = (*job)->Train(**source);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_GT(report->checkpoints_written, 0);
    ASSERT_TRUE((*job)->Gather().ok());
    Result<std::string> hash = (*job)->ModelHash();
    ASSERT_TRUE(hash.ok()) << hash.status();
    EXPECT_EQ(expected_hash, *hash);
    ASSERT_TRUE((*job)->Export(io::FormatSpec{}, false, report->steps).ok());
  }
  // The checkpoint's record alone configures the export.
  Result<ExportedCheckpoint> exported = ExportCheckpoint(Path("ck"), Path("exported"));
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ("dlrm", exported->model);
  ScorerOptions scorer_options;
  scorer_options.threads = 2;
  std::vector<std::vector<float>> scores;
  for (const char* bundle : {"bundle", "exported"}) {
    auto scorer = Scorer::Open(Path(bundle), scorer_options);
    ASSERT_TRUE(scorer.ok()) << bundle << ": " << scorer.status();
    Result<std::vector<float>> s = ember::test::ScoreAll(**scorer, test, 512);
    ASSERT_TRUE(s.ok()) << s.status();
    scores.push_back(*s);
  }
  ASSERT_EQ(scores[0].size(), scores[1].size());
  EXPECT_EQ(0, std::memcmp(scores[0].data(), scores[1].data(), scores[0].size() * sizeof(float)));
}

}  // namespace
}  // namespace ember::engine
