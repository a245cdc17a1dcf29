#include "scheduler/plan.h"

#include <gtest/gtest.h>

#include "tests/scheduler/scheduler_test_util.h"

namespace ember::scheduler {
namespace {

TEST(PlanLocalTrainingTest, ZeroThreadsMeansTheWholeHost) {
  auto plan = PlanLocalTraining(test::Host(8, 1 << 30), PlanRequest{});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(8, plan->threads);
  EXPECT_TRUE(plan->dense_device.is_cpu());
}

TEST(PlanLocalTrainingTest, MoreThreadsThanTheHostHasIsInvalidArgument) {
  PlanRequest request;
  request.threads = 9;
  auto plan = PlanLocalTraining(test::Host(8, 1 << 30), request);
  EXPECT_EQ(StatusCode::kInvalidArgument, plan.status().code());
  EXPECT_NE(std::string::npos, plan.status().message().find("--threads=9"));
}

TEST(PlanLocalTrainingTest, DenseGoesWhereTheRequestSaysIfTheHostHasIt) {
  PlanRequest request;
  request.dense_device = Device::Cuda(1);
  auto plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Device::Cuda(1), plan->dense_device);
  request.dense_device = Device::Cpu();
  plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->dense_device.is_cpu());
  request.dense_device = Device::Cuda(2);
  plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  EXPECT_EQ(StatusCode::kFailedPrecondition, plan.status().code());
  EXPECT_NE(std::string::npos, plan.status().message().find("--dense_device=cuda:2"))
      << plan.status();
}

}  // namespace
}  // namespace ember::scheduler
