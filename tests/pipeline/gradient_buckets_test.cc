#include "pipeline/gradient_buckets.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"
#include "tests/testing/in_process_ranks.h"

namespace ember::pipeline {
namespace {

// Parameters of `sizes` floats whose gradients on rank r are values whose
// float sums depend on the order of addition.
std::vector<ops::Parameter> Parameters(const std::vector<int64_t>& sizes, int rank) {
  std::vector<ops::Parameter> parameters;
  for (size_t p = 0; p < sizes.size(); ++p) {
    ops::Parameter parameter;
    parameter.value = Tensor::Zeros({sizes[p]});
    parameter.grad = Tensor::Empty({sizes[p]});
    for (int64_t i = 0; i < sizes[p]; ++i) {
      const double x = static_cast<double>((rank + 1) * 7919 + p * 104729 + i * 15485863 % 1000);
      parameter.grad.data<float>()[i] = static_cast<float>(std::ldexp(1.0 + x / 997.0,
                                                                      (rank * 13 + i) % 40 - 20));
    }
    parameters.push_back(std::move(parameter));
  }
  return parameters;
}

std::vector<ops::Parameter*> Pointers(std::vector<ops::Parameter>& parameters) {
  std::vector<ops::Parameter*> pointers;
  for (ops::Parameter& p : parameters) pointers.push_back(&p);
  return pointers;
}

using ::ember::test::OnInProcessRanks;

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)) == 0;
}

const std::vector<int64_t> kSizes = {300, 7, 1000, 64, 5, 250};

// Buckets of any size, their gradients reported in any order (and some never:
// Wait sends them), give every rank the bits of one all-reduce of the whole
// model, step after step.
TEST(GradientBucketsTest, BucketedGradientsAreTheBitsOfOneAllReduce) {
  for (int ranks : {2, 3}) {
    for (int64_t bucket_bytes : {int64_t{1}, int64_t{1200}, int64_t{1} << 20}) {
      auto bucket_comms = NewInProcessCommunicators(ranks, {.timeout_seconds = 30});
      ASSERT_TRUE(bucket_comms.ok());
      OnInProcessRanks(ranks, [&](int r, Communicator& comm) {
        std::vector<ops::Parameter> bucketed = Parameters(kSizes, r);
        std::vector<ops::Parameter> whole = Parameters(kSizes, r);
        GradientBuckets buckets(Pointers(bucketed), bucket_bytes, (*bucket_comms)[r].get());
        if (bucket_bytes == 1) EXPECT_EQ(static_cast<int>(kSizes.size()), buckets.buckets());
        if (bucket_bytes == (int64_t{1} << 20)) EXPECT_EQ(1, buckets.buckets());
        // Bucket 0 holds the last parameter: the backward's first.
        EXPECT_EQ(static_cast<int>(kSizes.size()) - 1, buckets.bucket(0).front());
        for (int step = 0; step < 3; ++step) {
          buckets.Start();
          // Reported from another thread (the backward's), last parameter
          // first, one left out on step 2.
          std::thread backward([&] {
            for (int p = static_cast<int>(kSizes.size()) - 1; p >= 0; --p) {
              if (step == 2 && p == 2) continue;
              buckets.Ready(p);
              std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
          });
          backward.join();
          const Status status = buckets.Wait();
          ASSERT_TRUE(status.ok()) << status;
          // The reference: one all-reduce of every gradient, packed.
          std::vector<float> packed;
          for (const ops::Parameter& p : whole) {
            const float* g = p.grad.data<float>();
            packed.insert(packed.end(), g, g + p.grad.numel());
          }
          ASSERT_TRUE(comm.AllReduce(packed, packed).ok());
          size_t at = 0;
          for (size_t p = 0; p < whole.size(); ++p) {
            std::memcpy(whole[p].grad.data<float>(), packed.data() + at,
                        whole[p].grad.numel() * sizeof(float));
            at += static_cast<size_t>(whole[p].grad.numel());
            EXPECT_TRUE(SameBits(whole[p].grad, bucketed[p].grad))
                << ranks << " ranks, buckets of " << bucket_bytes << " bytes, step " << step
                << ", rank " << r << ", parameter " << p;
          }
        }
      });
    }
  }
}

// A peer gone mid-step fails Wait naming the bucket; nothing hangs.
TEST(GradientBucketsTest, AFailedAllReduceFailsWaitWithoutHanging) {
  auto comms = NewInProcessCommunicators(2, {.timeout_seconds = 30});
  ASSERT_TRUE(comms.ok());
  std::vector<ops::Parameter> parameters = Parameters(kSizes, 0);
  (*comms)[1]->Abort(Status::Cancelled("rank 1 stopped"));
  GradientBuckets buckets(Pointers(parameters), 1200, (*comms)[0].get());
  buckets.Start();
  for (int p = static_cast<int>(kSizes.size()) - 1; p >= 0; --p) buckets.Ready(p);
  const Status status = buckets.Wait();
  EXPECT_EQ(StatusCode::kUnavailable, status.code()) << status;
  EXPECT_NE(std::string::npos, status.message().find("bucket 0 of")) << status;
}

}  // namespace
}  // namespace ember::pipeline
