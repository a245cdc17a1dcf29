#include "scheduler/plan.h"

#include <gtest/gtest.h>

namespace ember::scheduler {
namespace {

ResourceGraph Host(int threads, int gpus) {
  ResourceGraph graph;
  graph.host_name = "test";
  graph.cpu_threads = threads;
  for (int i = 0; i < gpus; ++i) graph.cuda_devices.push_back(Device::Cuda(i));
  return graph;
}

TEST(PlanLocalTrainingTest, ZeroThreadsMeansTheWholeHost) {
  auto plan = PlanLocalTraining(Host(8, 0), PlanRequest{});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(8, plan->threads);
  EXPECT_TRUE(plan->dense_device.is_cpu());
}

TEST(PlanLocalTrainingTest, MoreThreadsThanTheHostHasIsInvalidArgument) {
  PlanRequest request;
  request.threads = 9;
  auto plan = PlanLocalTraining(Host(8, 0), request);
  EXPECT_EQ(StatusCode::kInvalidArgument, plan.status().code());
  EXPECT_NE(std::string::npos, plan.status().message().find("--threads=9"));
}

TEST(PlanLocalTrainingTest, DenseGoesToTheGpuOnlyWhenItHasACudaPath) {
  PlanRequest request;
  request.dense_cuda_available = true;
  auto plan = PlanLocalTraining(Host(4, 2), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Device::Cuda(0), plan->dense_device);
  request.dense_cuda_available = false;
  plan = PlanLocalTraining(Host(4, 2), request);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->dense_device.is_cpu());
}

TEST(DiscoverLocalHostTest, FindsAtLeastOneThreadAndSomeMemory) {
  ResourceGraph graph = DiscoverLocalHost();
  EXPECT_GE(graph.cpu_threads, 1);
  EXPECT_GT(graph.memory_bytes, 0);
  EXPECT_EQ(static_cast<size_t>(CudaDeviceCount()), graph.cuda_devices.size());
}

}  // namespace
}  // namespace ember::scheduler
