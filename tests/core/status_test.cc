#include "core/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace ember {
namespace {

Result<int> ParsePositive(int value) {
  if (value <= 0) return Status::InvalidArgument("value ", value, " is not positive");
  return value;
}

Status DoubleIt(int value, int* out) {
  EMBER_ASSIGN_OR_RETURN(int parsed, ParsePositive(value));
  *out = parsed * 2;
  return Status::OK();
}

Status FailsThrough(int value) {
  EMBER_RETURN_IF_ERROR(ParsePositive(value).status());
  return Status::OK();
}

TEST(StatusTest, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ("OK", status.ToString());
}

TEST(StatusTest, FactoryConcatenatesMessageParts) {
  Status status = Status::InvalidArgument("file.tsv", ":", 12, ": expected 40 columns, got ", 7);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_EQ("file.tsv:12: expected 40 columns, got 7", status.message());
  EXPECT_EQ("InvalidArgument: file.tsv:12: expected 40 columns, got 7", status.ToString());
}

TEST(StatusTest, StatusCodeNameNamesEveryCode) {
  EXPECT_STREQ("OK", StatusCodeName(StatusCode::kOk));
  EXPECT_STREQ("InvalidArgument", StatusCodeName(StatusCode::kInvalidArgument));
  EXPECT_STREQ("NotFound", StatusCodeName(StatusCode::kNotFound));
  EXPECT_STREQ("AlreadyExists", StatusCodeName(StatusCode::kAlreadyExists));
  EXPECT_STREQ("IOError", StatusCodeName(StatusCode::kIOError));
  EXPECT_STREQ("OutOfRange", StatusCodeName(StatusCode::kOutOfRange));
  EXPECT_STREQ("FailedPrecondition", StatusCodeName(StatusCode::kFailedPrecondition));
  EXPECT_STREQ("ResourceExhausted", StatusCodeName(StatusCode::kResourceExhausted));
  EXPECT_STREQ("DataLoss", StatusCodeName(StatusCode::kDataLoss));
  EXPECT_STREQ("Cancelled", StatusCodeName(StatusCode::kCancelled));
  EXPECT_STREQ("Unimplemented", StatusCodeName(StatusCode::kUnimplemented));
  EXPECT_STREQ("Internal", StatusCodeName(StatusCode::kInternal));
  EXPECT_STREQ("DeadlineExceeded", StatusCodeName(StatusCode::kDeadlineExceeded));
  EXPECT_STREQ("Unavailable", StatusCodeName(StatusCode::kUnavailable));
}

TEST(StatusTest, DeadlineExceededAndUnavailableFactoriesSetTheirCodes) {
  Status late = Status::DeadlineExceeded("all_reduce #12: rank 3 did not answer within 5 s");
  EXPECT_EQ(StatusCode::kDeadlineExceeded, late.code());
  EXPECT_EQ("DeadlineExceeded: all_reduce #12: rank 3 did not answer within 5 s", late.ToString());
  EXPECT_EQ(StatusCode::kUnavailable, Status::Unavailable("rank 1 left").code());
}

TEST(StatusTest, WithContextPrefixesErrorsAndKeepsOk) {
  EXPECT_EQ("reading: gone", Status::NotFound("gone").WithContext("reading").message());
  EXPECT_TRUE(Status::OK().WithContext("reading").ok());
}

TEST(StatusTest, AssignOrReturnPassesValueThrough) {
  int out = 0;
  ASSERT_TRUE(DoubleIt(21, &out).ok());
  EXPECT_EQ(42, out);
}

TEST(StatusTest, AssignOrReturnPropagatesError) {
  int out = -1;
  Status status = DoubleIt(-3, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_EQ("value -3 is not positive", status.message());
  EXPECT_EQ(-1, out);
}

TEST(StatusTest, ReturnIfErrorPropagatesError) {
  EXPECT_TRUE(FailsThrough(1).ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, FailsThrough(0).code());
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> result = std::make_unique<int>(7);
  ASSERT_TRUE(result.ok());
  std::unique_ptr<int> value = std::move(result).value();
  EXPECT_EQ(7, *value);
}

TEST(ResultTest, ErrorResultReportsItsStatus) {
  Result<std::string> result = Status::IOError("disk full");
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(StatusCode::kIOError, result.status().code());
}

TEST(ResultDeathTest, ValueOfErrorIsABrokenInvariant) {
  Result<int> result = Status::Internal("boom");
  EXPECT_DEATH((void)result.value(), "boom");
}

}  // namespace
}  // namespace ember
