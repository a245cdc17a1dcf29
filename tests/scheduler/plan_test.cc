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

TEST(PlanLocalTrainingTest, DenseGoesToTheGpuOnlyWhenItHasACudaPath) {
  PlanRequest request;
  request.dense_cuda_available = true;
  auto plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Device::Cuda(0), plan->dense_device);
  request.dense_cuda_available = false;
  plan = PlanLocalTraining(test::Host(4, 1 << 30, 2, 1 << 30), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->dense_device.is_cpu());
}

}  // namespace
}  // namespace ember::scheduler
