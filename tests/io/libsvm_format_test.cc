#include "io/libsvm_format.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/feature_hash.h"
#include "tests/io/text_fixture.h"

namespace ember::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Frappe's fields as global index ranges (shared/data/README.md).
const std::vector<uint64_t> kFrappeFieldStarts = {0,    957,  5039, 5046, 5053,
                                                  5055, 5058, 5060, 5069, 5149};

std::unique_ptr<TextFormat> LibSvm(std::vector<uint64_t> field_starts = {},
                                   bool require_binary_values = false) {
  LibSvmFormatOptions options;
  options.field_starts = std::move(field_starts);
  options.require_binary_values = require_binary_values;
  Result<std::unique_ptr<TextFormat>> format = NewLibSvmFormat(options);
  EXPECT_TRUE(format.ok()) << format.status();
  return format.ok() ? std::move(*format) : nullptr;
}

std::unique_ptr<TextFormat> LibFfm(int num_fields, bool require_binary_values = false) {
  LibFfmFormatOptions options;
  options.num_fields = num_fields;
  options.require_binary_values = require_binary_values;
  Result<std::unique_ptr<TextFormat>> format = NewLibFfmFormat(options);
  EXPECT_TRUE(format.ok()) << format.status();
  return format.ok() ? std::move(*format) : nullptr;
}

Key K(int slot, const char* index) { return HashCategorical(slot, index); }

std::vector<size_t> DistinctKeysPerSlot(const Batch& batch) {
  std::vector<std::set<Key>> keys(batch.num_slots);
  for (int64_t i = 0; i < batch.size; ++i) {
    for (int s = 0; s < batch.num_slots; ++s) {
      for (const Key key : BagKeys(batch, i, s)) keys[s].insert(key);
    }
  }
  std::vector<size_t> counts;
  for (const auto& slot : keys) counts.push_back(slot.size());
  return counts;
}

class LibSvmTest : public TextFormatTest {};

TEST_F(LibSvmTest, EveryFeatureGoesIntoOneBagWithoutFields) {
  const auto format = LibSvm();
  EXPECT_EQ(1, format->layout().num_slots);
  Result<Dataset> data = ReadText(*format,
                                  "1 3:1 10:1\n"
                                  "-1\t5:1   3:0\n"
                                  "+1\n"
                                  "0 007:2.5 # a comment 9:1\n"
                                  "1.0 10:1 10:1\n",
                                  Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ExpectWellFormed(all);
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f, 1.0f, 0.0f, 1.0f}), all.labels);
  EXPECT_EQ((std::vector<Key>{K(0, "3"), K(0, "10")}), BagKeys(all, 0, 0));
  // A zero value is an absent feature.
  EXPECT_EQ(std::vector<Key>{K(0, "5")}, BagKeys(all, 1, 0));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 2, 0));
  // Leading zeros do not make another id; the value 2.5 only marks presence.
  EXPECT_EQ(std::vector<Key>{K(0, "7")}, BagKeys(all, 3, 0));
  EXPECT_EQ((std::vector<Key>{K(0, "10"), K(0, "10")}), BagKeys(all, 4, 0));
}

TEST_F(LibSvmTest, FieldStartsPutIndexRangesIntoSlots) {
  const auto format = LibSvm({0, 10, 20});
  ASSERT_EQ(3, format->layout().num_slots);
  Result<Dataset> data = ReadText(*format, "1 25:1 3:1 12:1 15:1\n0 19:1\n", Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  EXPECT_EQ(std::vector<Key>{K(0, "3")}, BagKeys(all, 0, 0));
  EXPECT_EQ((std::vector<Key>{K(1, "12"), K(1, "15")}), BagKeys(all, 0, 1));
  EXPECT_EQ(std::vector<Key>{K(2, "25")}, BagKeys(all, 0, 2));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 1, 0));
  EXPECT_EQ(std::vector<Key>{K(1, "19")}, BagKeys(all, 1, 1));
}

struct BadLineCase {
  const char* reason;
  const char* line;
  const char* got;
};

TEST_F(LibSvmTest, BadLinesAreCountedByReason) {
  // Fields from index 1: index 0 is in no field.
  const auto format = LibSvm({1, 10}, /*require_binary_values=*/true);
  const BadLineCase cases[] = {
      {"bad label", "", "no label"},
      {"bad label", "# just a comment", "no label"},
      {"bad label", "2 3:1", "\"2\""},
      {"bad label", "x 3:1", "\"x\""},
      {"bad label", "0.5 3:1", "\"0.5\""},
      {"bad feature", "1 3", "\"3\""},
      {"bad feature", "1 a:1", "\"a:1\""},
      {"bad feature", "1 3:1:1", "\"3:1:1\""},
      {"bad feature", "1 -3:1", "\"-3:1\""},
      {"bad feature", "1 :1", "\":1\""},
      {"bad feature", "1 3:2", "not binary"},
      {"unparsable number", "1 3:x", "\"3:x\""},
      {"unparsable number", "1 3:", "\"3:\""},
      {"unparsable number", "1 3:nan", "\"3:nan\""},
      {"unknown slot", "1 0:1", "below the first field start 1"},
  };
  for (const BadLineCase& c : cases) {
    SCOPED_TRACE(c.line);
    Result<Dataset> data = ReadText(*format, std::string("1 3:1\n") + c.line + "\n0 12:1\n");
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(2, data->size());
    EXPECT_EQ((std::map<std::string, int64_t>{{c.reason, 1}}), data->bad_lines().by_reason);
    EXPECT_THAT(data->bad_lines().first_examples,
                ElementsAre(StartsWith(Path("data.txt") + ":2: " + c.reason + " (got ")));
    EXPECT_THAT(data->bad_lines().first_examples[0], HasSubstr(c.got));

    Result<Dataset> strict =
        ReadText(*format, std::string("1 3:1\n") + c.line + "\n0 12:1\n", Strict());
    ASSERT_FALSE(strict.ok());
    EXPECT_THAT(strict.status().message(), StartsWith(Path("data.txt") + ":2: " + c.reason));
  }
}

TEST_F(LibSvmTest, LibFfmUsesTheFieldAsTheSlot) {
  const auto format = LibFfm(3);
  ASSERT_EQ(3, format->layout().num_slots);
  Result<Dataset> data = ReadText(*format,
                                  "1 0:3:1 2:7:1 1:5:0.5\r\n"
                                  "-1 2:07:1 2:8:1 0:1:0\r\n",
                                  Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ExpectWellFormed(all);
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f}), all.labels);
  EXPECT_EQ(std::vector<Key>{K(0, "3")}, BagKeys(all, 0, 0));
  EXPECT_EQ(std::vector<Key>{K(1, "5")}, BagKeys(all, 0, 1));
  EXPECT_EQ(std::vector<Key>{K(2, "7")}, BagKeys(all, 0, 2));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 1, 0));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 1, 1));
  EXPECT_EQ((std::vector<Key>{K(2, "7"), K(2, "8")}), BagKeys(all, 1, 2));
}

TEST_F(LibSvmTest, LibFfmBadLinesAreCountedByReason) {
  const auto format = LibFfm(3, /*require_binary_values=*/true);
  const BadLineCase cases[] = {
      {"bad label", "3 0:1:1", "\"3\""},
      {"bad feature", "1 0:1", "\"0:1\""},
      {"bad feature", "1 a:1:1", "\"a:1:1\""},
      {"bad feature", "1 0:b:1", "\"0:b:1\""},
      {"bad feature", "1 0:1:1:1", "\"0:1:1:1\""},
      {"bad feature", "1 0:1:3", "not binary"},
      {"unparsable number", "1 0:1:x", "\"0:1:x\""},
      {"unknown slot", "1 3:1:1", "field >= num_fields 3"},
  };
  for (const BadLineCase& c : cases) {
    SCOPED_TRACE(c.line);
    Result<Dataset> data = ReadText(*format, std::string("1 0:3:1\n") + c.line + "\n");
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(1, data->size());
    EXPECT_EQ((std::map<std::string, int64_t>{{c.reason, 1}}), data->bad_lines().by_reason);
    EXPECT_THAT(data->bad_lines().first_examples[0], HasSubstr(c.got));
  }
}

TEST(LibSvmFormatTest, RejectsBadOptions) {
  LibSvmFormatOptions svm;
  svm.field_starts = {0, 10, 10};
  EXPECT_THAT(NewLibSvmFormat(svm).status().message(), HasSubstr("must increase"));
  svm.field_starts = {0, 1, 2};
  svm.slot_bits = 1;
  EXPECT_THAT(NewLibSvmFormat(svm).status().message(), HasSubstr("slot bits"));
  svm.slot_bits = 33;
  EXPECT_EQ(StatusCode::kInvalidArgument, NewLibSvmFormat(svm).status().code());
  LibFfmFormatOptions ffm;
  EXPECT_THAT(NewLibFfmFormat(ffm).status().message(), HasSubstr("num_fields >= 1"));
  ffm.num_fields = 3;
  ffm.slot_bits = 1;
  EXPECT_THAT(NewLibFfmFormat(ffm).status().message(), HasSubstr("slot bits"));
}

TEST_F(LibSvmTest, GzipReadsLikeThePlainFile) {
  std::string text;
  for (int i = 0; i < 2000; ++i) {
    text.append(i % 2 ? "1" : "-1").append(" ").append(std::to_string(i % 13)).append(":1 ");
    text.append(std::to_string(20 + i % 7)).append(":1\r\n");
  }
  const auto format = LibSvm({0, 20});
  Result<Dataset> plain = ReadTextFiles({Write("a.libfm", text)}, *format, Strict());
  Result<Dataset> gzip = ReadTextFiles({WriteGzip("a.libfm.gz", text)}, *format, Strict());
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  EXPECT_EQ(2000, gzip->size());
  ExpectSameBatch(plain->all(), gzip->all());
}

TEST_F(LibSvmTest, FrappeSplitsReadWithOneKeyPerField) {
  const std::string validation = SharedDataPath("frappe/frappe.validation.libfm");
  const std::string test = SharedDataPath("frappe/frappe.test.libfm");
  if (!FileExists(validation) || !FileExists(test)) {
    GTEST_SKIP() << "no shared data at " << validation;
  }
  const auto format = LibSvm(kFrappeFieldStarts, /*require_binary_values=*/true);
  TextReadOptions options = Strict();
  options.threads = 1;
  Result<Dataset> one = ReadTextFiles({validation}, *format, options);
  ASSERT_TRUE(one.ok()) << one.status();
  const Batch& all = one->all();
  EXPECT_EQ(57722, all.size);
  EXPECT_EQ(19063, CountPositives(all));
  ASSERT_EQ(10, all.num_slots);
  EXPECT_EQ(static_cast<size_t>(all.size * 10), all.keys.size());
  for (int s = 0; s < 10; ++s) EXPECT_EQ(1, all.BagSize(12345, s));
  EXPECT_EQ((std::vector<size_t>{884, 4082, 7, 7, 2, 3, 2, 9, 75, 221}), DistinctKeysPerSlot(all));

  // The file is about 4 MiB: several pieces, the same result on 2 threads.
  options.threads = 2;
  Result<Dataset> two = ReadTextFiles({validation}, *format, options);
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectSameBatch(all, two->all());

  Result<Dataset> test_split = ReadTextFiles({test}, *format, Strict());
  ASSERT_TRUE(test_split.ok()) << test_split.status();
  EXPECT_EQ(28860, test_split->size());
  EXPECT_EQ(9536, CountPositives(test_split->all()));
  EXPECT_EQ((std::vector<size_t>{811, 4054, 7, 7, 2, 3, 2, 8, 76, 217}),
            DistinctKeysPerSlot(test_split->all()));

  // Without fields: one bag of the 10 features.
  Result<Dataset> one_bag = ReadTextFiles({test}, *LibSvm(), Strict());
  ASSERT_TRUE(one_bag.ok()) << one_bag.status();
  EXPECT_EQ(10, one_bag->all().BagSize(0, 0));
  EXPECT_EQ(test_split->all().labels, one_bag->all().labels);
}

}  // namespace
}  // namespace ember::io
