// Bundles written by an earlier Ember (tests/engine/testdata/bundles_v1 and
// bundles_v2, see their READMEs) still load, to the options they were
// written with, and score their inputs as that Ember's `ember predict` did;
// so does a job record of the first version (testdata/job_record_v1).

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/bundle.h"
#include "engine/job_record.h"
#include "engine/scorer.h"
#include "engine/serving_input.h"
#include "io/batch_source.h"
#include "io/columnar.h"
#include "io/text_reader.h"

namespace ember::engine {
namespace {

std::string TestData(const std::string& name, const std::string& dir = "bundles_v1") {
  return std::string(EMBER_TESTDATA_DIR) + "/" + dir + "/" + name;
}

// The scores `ember predict` wrote: one line per example, tasks by tabs.
std::vector<float> ReadScores(const std::string& path) {
  std::ifstream in(path);
  std::vector<float> scores;
  std::string word;
  while (in >> word) scores.push_back(std::strtof(word.c_str(), nullptr));
  return scores;
}

// Reads `input` as the bundle's training read its input and scores it.
Result<std::vector<float>> ScoreInput(const std::string& bundle, const std::string& input) {
  EMBER_ASSIGN_OR_RETURN(auto scorer, Scorer::Open(bundle));
  io::Dataset data;
  if (scorer->config().columnar_input) {
    EMBER_ASSIGN_OR_RETURN(data, io::ReadColumnarDataset(input));
  } else {
    EMBER_ASSIGN_OR_RETURN(auto format, ServingTextFormat(scorer->config().input, true));
    io::TextReadOptions options;
    options.bad_lines = io::BadLinePolicy::kFail;
    EMBER_ASSIGN_OR_RETURN(data, io::ReadTextFiles({input}, *format, options));
  }
  io::DatasetBatchSourceOptions batches;
  batches.batch_size = 4096;  // `ember predict`'s --score_batch_size
  io::DatasetBatchSource source(data, batches);
  std::vector<float> scores;
  EMBER_RETURN_IF_ERROR(scorer->ScoreAll(source, [&](const io::Batch& batch, const float* s) {
    scores.insert(scores.end(), s, s + batch.size * scorer->num_tasks());
    return Status::OK();
  }));
  return scores;
}

void ExpectScoresAsWritten(const std::string& name, const std::string& input,
                           const std::string& dir = "bundles_v1") {
  Result<std::vector<float>> scores =
      ScoreInput(TestData(name + "/bundle", dir), TestData(name + "/" + input, dir));
  ASSERT_TRUE(scores.ok()) << scores.status();
  const std::vector<float> expected = ReadScores(TestData(name + "/scores.txt", dir));
  ASSERT_EQ(expected.size(), scores->size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(expected[i], (*scores)[i], 1e-6) << "score " << i;
  }
}

Result<BundleConfig> ConfigOf(const std::string& name, const std::string& dir = "bundles_v1") {
  EMBER_ASSIGN_OR_RETURN(VerifiedBundle bundle, VerifyBundle(TestData(name + "/bundle", dir)));
  return bundle.config;
}

TEST(BundleTestdataTest, ACriteoBundleLoadsToItsOptionsAndScores) {
  Result<BundleConfig> config = ConfigOf("criteo");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ("dlrm", config->model.name);
  EXPECT_EQ(13, config->model.num_dense);
  EXPECT_EQ(26, config->model.num_slots);
  EXPECT_EQ(std::vector<int>{8}, config->model.params.WidthList("bottom_mlp"));
  EXPECT_EQ(4, config->embedding_dim);
  EXPECT_FALSE(config->columnar_input);
  EXPECT_EQ("criteo", config->input.name);
  EXPECT_EQ(10, config->input.slot_bits);
  EXPECT_EQ(io::DenseTransform::kLog1p, config->input.dense_defaults.transform);
  EXPECT_FALSE(config->input.dense_defaults.min.has_value());
  EXPECT_FALSE(config->input.dense_defaults.max.has_value());
  ExpectScoresAsWritten("criteo", "score_input.tsv");
}

TEST(BundleTestdataTest, AColumnarBundleLoadsAsColumnarInputAndScores) {
  Result<BundleConfig> config = ConfigOf("columnar");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->columnar_input);
  EXPECT_EQ("criteo", config->input.name);
  EXPECT_EQ(2, config->model.num_dense);
  EXPECT_EQ(3, config->model.num_slots);
  EXPECT_EQ(4, config->step);
  ExpectScoresAsWritten("columnar", "score_input.col");
}

TEST(BundleTestdataTest, ACsvBundleKeepsItsSchemaAndDenseDefaults) {
  Result<BundleConfig> config = ConfigOf("csv");
  ASSERT_TRUE(config.ok()) << config.status();
  const io::FormatSpec& input = config->input;
  EXPECT_EQ("csv", input.name);
  EXPECT_EQ("label,1-2=dense,3-4=cat,5=multi", input.schema);
  EXPECT_TRUE(input.header);
  EXPECT_EQ(",", input.delimiter);
  EXPECT_EQ(io::DenseTransform::kRaw, input.dense_defaults.transform);
  EXPECT_EQ(0.0, input.dense_defaults.min.value_or(-1));
  EXPECT_EQ(50.5, input.dense_defaults.max.value_or(-1));
  EXPECT_EQ(uint64_t{7}, config->model.seed);
  EXPECT_EQ(uint64_t{7}, config->table_seed);
  ExpectScoresAsWritten("csv", "score_input.csv");
}

TEST(BundleTestdataTest, AnMmoeBundleKeepsItsTasksAndAdmission) {
  Result<BundleConfig> config = ConfigOf("mmoe");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ("mmoe", config->model.name);
  EXPECT_EQ(2, config->model.num_tasks);
  EXPECT_EQ(2, config->model.params.Int("num_experts"));
  EXPECT_EQ((std::vector<int>{8, 4}), config->model.params.WidthList("expert_mlp"));
  EXPECT_TRUE(config->missing_keys_read_zero);
  EXPECT_EQ("0-1=label,2-3=dense,4-6=cat", config->input.schema);
  ExpectScoresAsWritten("mmoe", "score_input.csv");
}

TEST(BundleTestdataTest, AMoeBundleKeepsItsRouting) {
  Result<BundleConfig> config = ConfigOf("moe");
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelOptions& model = config->model;
  EXPECT_EQ("moe", model.name);
  EXPECT_EQ(1, model.params.Int("moe_top_k"));
  EXPECT_EQ(1.5, model.params.Double("moe_capacity_factor"));
  EXPECT_EQ(std::vector<int>{8}, model.params.WidthList("moe_expert_mlp"));
  EXPECT_EQ(0.02, model.params.Double("moe_aux_loss_weight"));
  EXPECT_EQ("bottom", model.params.String("moe_gate_input"));
  EXPECT_EQ(ops::ComputePrecision::kF32, model.precision);
  EXPECT_TRUE(config->columnar_input);
  ExpectScoresAsWritten("moe", "score_input.col");
}

// Version 2 manifests hold every model's parameters; each bundle reads its
// own model's and scores as written.
TEST(BundleTestdataTest, Version2BundlesLoadTheirModelsOwnParametersAndScore) {
  Result<BundleConfig> dlrm = ConfigOf("dlrm", "bundles_v2");
  ASSERT_TRUE(dlrm.ok()) << dlrm.status();
  EXPECT_EQ("dlrm", dlrm->model.name);
  ASSERT_EQ(1u, dlrm->model.params.values().size());
  EXPECT_EQ(std::vector<int>{8}, dlrm->model.params.WidthList("bottom_mlp"));
  ExpectScoresAsWritten("dlrm", "score_input.tsv", "bundles_v2");

  Result<BundleConfig> dcn = ConfigOf("dcn_v2", "bundles_v2");
  ASSERT_TRUE(dcn.ok()) << dcn.status();
  ASSERT_EQ(2u, dcn->model.params.values().size());
  EXPECT_EQ(2, dcn->model.params.Int("cross_layers"));
  EXPECT_EQ(2, dcn->model.params.Int("cross_rank"));
  ExpectScoresAsWritten("dcn_v2", "score_input.col", "bundles_v2");

  Result<BundleConfig> mmoe = ConfigOf("mmoe", "bundles_v2");
  ASSERT_TRUE(mmoe.ok()) << mmoe.status();
  EXPECT_EQ(2, mmoe->model.params.Int("num_experts"));
  EXPECT_EQ((std::vector<int>{8, 4}), mmoe->model.params.WidthList("expert_mlp"));
  EXPECT_EQ(nullptr, mmoe->model.params.Find("bottom_mlp"));
  ExpectScoresAsWritten("mmoe", "score_input.csv", "bundles_v2");

  Result<BundleConfig> moe = ConfigOf("moe", "bundles_v2");
  ASSERT_TRUE(moe.ok()) << moe.status();
  const ModelParams& p = moe->model.params;
  EXPECT_EQ(7u, p.values().size());
  EXPECT_EQ(std::vector<int>{8}, p.WidthList("bottom_mlp"));
  EXPECT_EQ(2, p.Int("num_experts"));
  EXPECT_EQ(1, p.Int("moe_top_k"));
  EXPECT_EQ(1.5, p.Double("moe_capacity_factor"));
  EXPECT_EQ(std::vector<int>{8}, p.WidthList("moe_expert_mlp"));
  EXPECT_EQ(0.02, p.Double("moe_aux_loss_weight"));
  EXPECT_EQ("bottom", p.String("moe_gate_input"));
  ExpectScoresAsWritten("moe", "score_input.col", "bundles_v2");
}

TEST(BundleTestdataTest, AFirstVersionJobRecordReadsItsModelsOwnParameters) {
  Result<JobRecord> record = ReadJobRecord(TestData("", "job_record_v1"));
  ASSERT_TRUE(record.ok()) << record.status();
  const ModelOptions& model = record->model;
  EXPECT_EQ("moe", model.name);
  EXPECT_EQ(7u, model.params.values().size());
  EXPECT_EQ(2, model.params.Int("num_experts"));
  EXPECT_EQ(1, model.params.Int("moe_top_k"));
  EXPECT_EQ(std::vector<int>{8}, model.params.WidthList("bottom_mlp"));
  EXPECT_EQ(std::vector<int>{}, model.params.WidthList("moe_expert_mlp"));
}

}  // namespace
}  // namespace ember::engine
