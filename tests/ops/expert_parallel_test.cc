// ExpertParallel (ops/expert_parallel.h): the dispatch sends each expert's
// rows to its owner and the combine brings them back, with ranks whose
// batches (and so capacities) differ; bytes are counted; uneven experts are
// refused. The whole layer's equivalence with one rank is in
// tests/engine/distributed_trainer_test.cc (the ExpertParallelMoe cases).

#include "ops/expert_parallel.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"

namespace ember::ops {
namespace {

// The value a rank's row holds: which rank, which expert, which row of the
// expert's buffer, which column.
float Code(int64_t rank, int64_t expert, int64_t row, int64_t col) {
  return static_cast<float>(rank * 1000000 + expert * 10000 + row * 10 + col);
}

TEST(ExpertParallelTest, RowsReachTheirExpertsOwnerAndComeBack) {
  constexpr int kRanks = 3;
  constexpr int64_t kExperts = 6, kWidth = 2;
  // Capacities differ by rank (the short last batch of an epoch).
  const std::vector<int64_t> capacity = {3, 2, 4};
  auto comms = NewInProcessCommunicators(kRanks, {.timeout_seconds = 30});
  ASSERT_TRUE(comms.ok()) << comms.status();
  std::vector<Status> status(kRanks);
  std::vector<int64_t> sent(kRanks), received(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      status[r] = [&]() -> Status {
        ExpertParallel experts((*comms)[r].get());
        const int64_t c = capacity[r];
        // Two padding rows after the experts' buffers.
        Tensor local = Tensor::Empty({kExperts * c + 2, kWidth});
        for (int64_t e = 0; e < kExperts; ++e) {
          for (int64_t i = 0; i < c; ++i) {
            for (int64_t d = 0; d < kWidth; ++d) {
              local.data<float>()[(e * c + i) * kWidth + d] = Code(r, e, i, d);
            }
          }
        }
        std::vector<ExpertBlock> blocks;
        EMBER_ASSIGN_OR_RETURN(Tensor got, experts.Dispatch(/*node=*/7, local, kExperts, c,
                                                            /*backward=*/false, &blocks));
        // Rank r owns experts 2r and 2r + 1; their rows come source by source.
        const int64_t total = 2 * (capacity[0] + capacity[1] + capacity[2]);
        EXPECT_EQ(got.dim(0), total) << "rank " << r;
        EXPECT_EQ(blocks.size(), 2u * kRanks) << "rank " << r;
        size_t b = 0;
        for (int64_t s = 0; s < kRanks; ++s) {
          for (int64_t j = 0; j < 2; ++j, ++b) {
            const ExpertBlock& block = blocks[b];
            EXPECT_EQ(block.expert, 2 * r + j);
            EXPECT_EQ(block.end - block.begin, capacity[s]);
            for (int64_t i = 0; i < capacity[s]; ++i) {
              for (int64_t d = 0; d < kWidth; ++d) {
                EXPECT_EQ(got.data<float>()[(block.begin + i) * kWidth + d],
                          Code(s, 2 * r + j, i, d))
                    << "rank " << r << " block " << b << " row " << i;
              }
            }
          }
        }
        // The owner's work: negate (wider output, as an expert layer may be).
        Tensor computed = Tensor::Empty({got.dim(0), 2 * kWidth});
        for (int64_t i = 0; i < got.dim(0); ++i) {
          for (int64_t d = 0; d < 2 * kWidth; ++d) {
            computed.data<float>()[i * 2 * kWidth + d] = -got.data<float>()[i * kWidth + d % kWidth];
          }
        }
        Tensor back = Tensor::Empty({kExperts * c + 2, 2 * kWidth});
        back.SetZero();
        back.data<float>()[(kExperts * c) * 2 * kWidth] = 42.0f;  // Padding stays.
        EMBER_RETURN_IF_ERROR(experts.Combine(7, computed, /*backward=*/false, &back));
        for (int64_t e = 0; e < kExperts; ++e) {
          for (int64_t i = 0; i < c; ++i) {
            for (int64_t d = 0; d < 2 * kWidth; ++d) {
              EXPECT_EQ(back.data<float>()[(e * c + i) * 2 * kWidth + d], -Code(r, e, i, d % kWidth))
                  << "rank " << r << " expert " << e << " row " << i;
            }
          }
        }
        EXPECT_EQ(back.data<float>()[(kExperts * c) * 2 * kWidth], 42.0f);
        // The backward's dispatch reuses the forward's capacities.
        EMBER_ASSIGN_OR_RETURN(Tensor again,
                               experts.Dispatch(7, local, kExperts, c, /*backward=*/true, &blocks));
        EXPECT_EQ(again.dim(0), total);
        sent[r] = experts.sent_bytes();
        received[r] = experts.received_bytes();
        return Status::OK();
      }();
      if (!status[r].ok()) (*comms)[r]->Abort(status[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    // Per exchange, rank r sends 2 experts' rows to each other rank (width
    // kWidth twice: the two dispatches; 2 kWidth once: the combine) and
    // receives 2 experts' rows of each other rank.
    int64_t others = 0;
    for (int s = 0; s < kRanks; ++s) others += s == r ? 0 : capacity[s];
    const int64_t bytes = sizeof(float);
    EXPECT_EQ(sent[r], 2 * capacity[r] * (kRanks - 1) * (2 * kWidth) * bytes +
                           2 * others * (2 * kWidth) * bytes)
        << "rank " << r;
    EXPECT_EQ(received[r], 2 * others * (2 * kWidth) * bytes +
                               2 * capacity[r] * (kRanks - 1) * (2 * kWidth) * bytes)
        << "rank " << r;
  }
}

// Two chained layers: the rows go out at the first and come back at the
// second; between them they stay on the owners (forward and backward).
TEST(ExpertParallelTest, ChainedLayersExchangeOnlyAtTheirEnds) {
  constexpr int kRanks = 2;
  constexpr int64_t kExperts = 2, kCapacity = 3, kWidth = 4;
  auto comms = NewInProcessCommunicators(kRanks, {.timeout_seconds = 30});
  ASSERT_TRUE(comms.ok()) << comms.status();
  std::vector<Status> status(kRanks);
  std::vector<int64_t> sent(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      status[r] = [&]() -> Status {
        ExpertParallel experts((*comms)[r].get());
        experts.ChainLayers(/*from=*/1, /*to=*/2);
        const int64_t rows = kExperts * kCapacity;
        Tensor local = Tensor::Empty({rows, kWidth});
        for (int64_t i = 0; i < rows * kWidth; ++i) local.data<float>()[i] = 100.0f * r + i;
        std::vector<ExpertBlock> blocks, blocks2;
        // Forward: layer 1 dispatches; its result stays for layer 2.
        EMBER_ASSIGN_OR_RETURN(Tensor got, experts.Dispatch(1, local, kExperts, kCapacity,
                                                            /*backward=*/false, &blocks));
        Tensor between = Tensor::Empty({rows, kWidth});
        between.data<float>()[0] = 7.0f;
        EMBER_RETURN_IF_ERROR(experts.Combine(1, got, /*backward=*/false, &between));
        EXPECT_EQ(between.data<float>()[0], 0.0f) << "the local rows between are zeros";
        EMBER_ASSIGN_OR_RETURN(Tensor again, experts.Dispatch(2, between, kExperts, kCapacity,
                                                              /*backward=*/false, &blocks2));
        EXPECT_EQ(again.raw_data(), got.raw_data()) << "layer 2 reads layer 1's rows in place";
        EXPECT_EQ(blocks2.size(), blocks.size());
        Tensor out = Tensor::Empty({rows, kWidth});
        EMBER_RETURN_IF_ERROR(experts.Combine(2, again, /*backward=*/false, &out));
        for (int64_t i = 0; i < rows * kWidth; ++i) {
          EXPECT_EQ(out.data<float>()[i], local.data<float>()[i]) << "rank " << r << " at " << i;
        }
        // Backward: layer 2 dispatches the gradient; layer 1 combines it.
        EMBER_ASSIGN_OR_RETURN(Tensor dy, experts.Dispatch(2, local, kExperts, kCapacity,
                                                           /*backward=*/true, &blocks2));
        EMBER_RETURN_IF_ERROR(experts.Combine(2, dy, /*backward=*/true, &between));
        EMBER_ASSIGN_OR_RETURN(Tensor dy1, experts.Dispatch(1, between, kExperts, kCapacity,
                                                            /*backward=*/true, &blocks));
        EXPECT_EQ(dy1.raw_data(), dy.raw_data());
        Tensor dx = Tensor::Empty({rows, kWidth});
        EMBER_RETURN_IF_ERROR(experts.Combine(1, dy1, /*backward=*/true, &dx));
        for (int64_t i = 0; i < rows * kWidth; ++i) {
          EXPECT_EQ(dx.data<float>()[i], local.data<float>()[i]) << "rank " << r << " at " << i;
        }
        sent[r] = experts.sent_bytes();
        return Status::OK();
      }();
      if (!status[r].ok()) (*comms)[r]->Abort(status[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    // Four exchanges (out and back, forward and backward) of the expert
    // owned by the other rank: kCapacity rows of kWidth floats each.
    EXPECT_EQ(sent[r], 4 * kCapacity * kWidth * int64_t{sizeof(float)}) << "rank " << r;
  }
}

TEST(ExpertParallelTest, ExpertsThatDoNotDivideAmongTheRanksAreRefused) {
  auto comms = NewInProcessCommunicators(3, {.timeout_seconds = 5});
  ASSERT_TRUE(comms.ok());
  ExpertParallel experts((*comms)[0].get());
  EXPECT_TRUE(experts.CheckExperts(6).ok());
  const Status uneven = experts.CheckExperts(4);
  EXPECT_EQ(uneven.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(uneven.message().find("4 experts do not divide among 3 ranks"), std::string::npos)
      << uneven;
}

TEST(ExpertParallelTest, LocalBlocksCoverEachExpertsBuffer) {
  const std::vector<ExpertBlock> blocks = LocalExpertBlocks(3, 5);
  ASSERT_EQ(blocks.size(), 3u);
  for (int64_t e = 0; e < 3; ++e) {
    EXPECT_EQ(blocks[e].expert, e);
    EXPECT_EQ(blocks[e].begin, 5 * e);
    EXPECT_EQ(blocks[e].end, 5 * e + 5);
  }
}

}  // namespace
}  // namespace ember::ops
