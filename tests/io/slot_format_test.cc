#include "io/slot_format.h"

#include <cstdint>
#include <map>
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

std::unique_ptr<TextFormat> Slots(SlotFormatOptions options) {
  Result<std::unique_ptr<TextFormat>> format = NewSlotFormat(options);
  EXPECT_TRUE(format.ok()) << format.status();
  return format.ok() ? std::move(*format) : nullptr;
}

// Sparse "user" and "item", dense "ctr" (1) and "d" (2); label first.
SlotFormatOptions UserItemOptions() {
  SlotFormatOptions options;
  options.slots = {"user", "item"};
  options.dense_slots = {{"ctr", 1}, {"d", 2}};
  return options;
}

class SlotFormatTest : public TextFormatTest {};

TEST_F(SlotFormatTest, LabelFirstThenSparseBagsAndDenseValuesInAnyOrder) {
  const auto format = Slots(UserItemOptions());
  const TextLayout layout = format->layout();
  EXPECT_EQ(1, layout.num_labels);
  EXPECT_EQ(3, layout.num_dense);
  EXPECT_EQ(2, layout.num_slots);
  Result<Dataset> data = ReadText(*format,
                                  "1 user:10086 item:357 d:1 item:421 ctr:0.05 d:2\n"
                                  "0\titem:9\r\n"
                                  "1 item:9 user:7 d:-3e2\n",
                                  Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  ExpectWellFormed(all);
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f, 1.0f}), all.labels);
  EXPECT_EQ((std::vector<float>{0.05f, 1.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f, -300.0f, 0.0f}),
            all.dense);
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "10086")}, BagKeys(all, 0, 0));
  EXPECT_EQ((std::vector<Key>{HashCategorical(1, "357"), HashCategorical(1, "421")}),
            BagKeys(all, 0, 1));
  // An absent slot is an empty bag.
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 1, 0));
  EXPECT_EQ(std::vector<Key>{HashCategorical(1, "9")}, BagKeys(all, 1, 1));
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "7")}, BagKeys(all, 2, 0));
}

TEST_F(SlotFormatTest, LabelSlotsGiveOneOrSeveralLabelsAnywhereInTheLine) {
  SlotFormatOptions options;
  options.slots = {"user", "item"};
  options.label_slots = {"click", "like"};
  const auto format = Slots(options);
  ASSERT_EQ(2, format->layout().num_labels);
  Result<Dataset> data =
      ReadText(*format, "user:1 like:0 click:1 item:3\nlike:0.5 click:0 item:4\n", Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((std::vector<float>{1.0f, 0.0f, 0.0f, 0.5f}), data->all().labels);
  EXPECT_EQ(std::vector<Key>{HashCategorical(1, "4")}, BagKeys(data->all(), 1, 1));
}

TEST_F(SlotFormatTest, FeasignFirstPairsAsInPaddleRecSlotDnnData) {
  // slot_dnn's demo data: "feasign:slot", the click is slot 1, slots 2 on
  // are sparse, slots it does not declare are skipped.
  SlotFormatOptions options;
  Result<std::vector<std::string>> slots = ParseSlotList("2-4");
  ASSERT_TRUE(slots.ok()) << slots.status();
  options.slots = *slots;
  options.label_slots = {"1"};
  options.feasign_first = true;
  options.ignore_unknown_slots = true;
  const auto format = Slots(options);
  Result<Dataset> data = ReadText(
      *format, "0:1 13030533623378965644:2 10711181114198415597:3 15924961041983592446:3 9:409\n",
      Strict());
  ASSERT_TRUE(data.ok()) << data.status();
  const Batch& all = data->all();
  EXPECT_EQ(std::vector<float>{0.0f}, all.labels);
  EXPECT_EQ(std::vector<Key>{HashCategorical(0, "13030533623378965644")}, BagKeys(all, 0, 0));
  EXPECT_EQ((std::vector<Key>{HashCategorical(1, "10711181114198415597"),
                              HashCategorical(1, "15924961041983592446")}),
            BagKeys(all, 0, 1));
  EXPECT_EQ(std::vector<Key>{}, BagKeys(all, 0, 2));
  // Numbered slots are matched as names: "03" is not slot "3".
  options.ignore_unknown_slots = false;
  Result<Dataset> strict = ReadText(*Slots(options), "1:1 5:03\n", Strict());
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(), HasSubstr(":1: unknown slot (got \"5:03\")"));
}

struct BadLineCase {
  const char* reason;
  const char* line;
  const char* got;
};

TEST_F(SlotFormatTest, BadLinesAreCountedByReason) {
  const auto leading = Slots(UserItemOptions());
  SlotFormatOptions with_label_slot = UserItemOptions();
  with_label_slot.label_slots = {"click"};
  const auto labelled = Slots(with_label_slot);
  struct Case {
    const TextFormat* format;
    BadLineCase bad;
  };
  const Case cases[] = {
      {leading.get(), {"bad label", "", "no label"}},
      {leading.get(), {"bad label", "x user:1", "\"x\""}},
      {leading.get(), {"bad label", "2 user:1", "\"2\""}},
      {labelled.get(), {"bad label", "user:1", "no click"}},
      {labelled.get(), {"bad label", "click:1 click:0", "\"click:0\""}},
      {labelled.get(), {"bad label", "click:x", "\"click:x\""}},
      {leading.get(), {"bad feature", "1 user", "\"user\""}},
      {leading.get(), {"bad feature", "1 user:", "\"user:\""}},
      {leading.get(), {"bad feature", "1 d:1 d:2 d:3", "more than 2 values"}},
      {leading.get(), {"unparsable number", "1 ctr:abc", "\"ctr:abc\""}},
      {leading.get(), {"unparsable number", "1 ctr:", "\"ctr:\""}},
      {leading.get(), {"unknown slot", "1 age:3", "\"age:3\""}},
      {labelled.get(), {"unknown slot", "click:1 :3", "\":3\""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.bad.line);
    const std::string good = c.format == leading.get() ? "1 user:1\n" : "click:1 user:1\n";
    Result<Dataset> data = ReadText(*c.format, good + c.bad.line + "\n" + good);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(2, data->size());
    EXPECT_EQ((std::map<std::string, int64_t>{{c.bad.reason, 1}}), data->bad_lines().by_reason);
    EXPECT_THAT(data->bad_lines().first_examples,
                ElementsAre(StartsWith(Path("data.txt") + ":2: " + c.bad.reason + " (got ")));
    EXPECT_THAT(data->bad_lines().first_examples[0], HasSubstr(c.bad.got));

    Result<Dataset> strict = ReadText(*c.format, good + c.bad.line + "\n" + good, Strict());
    ASSERT_FALSE(strict.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, strict.status().code());
    EXPECT_THAT(strict.status().message(), StartsWith(Path("data.txt") + ":2: " + c.bad.reason));
  }
}

TEST_F(SlotFormatTest, LargeFileReadsIdenticallyWithOneAndTwoThreads) {
  std::string text;
  for (int i = 0; i < 120000; ++i) {
    text += std::to_string(i % 3 == 0) + " user:" + std::to_string(i % 997);
    for (int k = 0; k < i % 4; ++k) text += " item:" + std::to_string((i * 7 + k) % 5000);
    if (i % 5 == 0) text += " ctr:0." + std::to_string(i % 10);
    text += "\n";
  }
  const std::string path = Write("big.slot", text);
  const auto format = Slots(UserItemOptions());
  const Dataset one = ReadOnOneAndTwoThreads(path, *format);
  EXPECT_EQ(120000, one.size());
}

TEST(SlotFormatOptionsTest, RejectsBadDeclarations) {
  struct Case {
    SlotFormatOptions options;
    const char* message;
  };
  SlotFormatOptions empty;
  SlotFormatOptions twice;
  twice.slots = {"a", "b"};
  twice.label_slots = {"b"};
  SlotFormatOptions colon;
  colon.slots = {"a:b"};
  SlotFormatOptions blank;
  blank.slots = {""};
  SlotFormatOptions width;
  width.slots = {"a"};
  width.dense_slots = {{"d", 0}};
  SlotFormatOptions bits;
  bits.slots = {"a", "b", "c"};
  bits.slot_bits = 1;
  const Case cases[] = {
      {empty, "at least one sparse or dense slot"},
      {twice, "\"b\" is declared twice"},
      {colon, "holds ':'"},
      {blank, "is empty"},
      {width, "width 0"},
      {bits, "slot bits"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    Result<std::unique_ptr<TextFormat>> format = NewSlotFormat(c.options);
    ASSERT_FALSE(format.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, format.status().code());
    EXPECT_THAT(format.status().message(), HasSubstr(c.message));
  }
}

TEST(SlotListTest, ExpandsIntegerRangesAndKeepsNames) {
  EXPECT_EQ((std::vector<std::string>{"click", "2", "3", "4", "user"}),
            *ParseSlotList("click,2-4,user"));
  EXPECT_EQ(std::vector<std::string>{}, *ParseSlotList(""));
  EXPECT_EQ((std::vector<std::string>{"a-b"}), *ParseSlotList("a-b"));
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseSlotList("a,,b").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseSlotList("5-3").status().code());
  Result<std::vector<DenseSlot>> dense = ParseDenseSlotList("dense_feature:13,ctr");
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_EQ(2u, dense->size());
  EXPECT_EQ("dense_feature", (*dense)[0].name);
  EXPECT_EQ(13, (*dense)[0].width);
  EXPECT_EQ("ctr", (*dense)[1].name);
  EXPECT_EQ(1, (*dense)[1].width);
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseDenseSlotList("x:0").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseDenseSlotList("x:a").status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, ParseDenseSlotList(":3").status().code());
}

}  // namespace
}  // namespace ember::io
