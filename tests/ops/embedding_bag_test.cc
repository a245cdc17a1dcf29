#include <cstdint>
#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/dense_ops.h"
#include "tests/ops/gradient_check.h"
#include "tests/ops/test_tensors.h"

namespace ember::ops {
namespace {

using ::testing::ElementsAre;
using testing::ExpectAllClose;
using ::testing::HasSubstr;
using testing::NumericGradient;
using testing::RandomTensor;
using testing::ToDouble;
using testing::Values;
using testing::WeightedSum;

Tensor I64(const std::vector<int64_t>& values) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(values.size())}, DType::kI64);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

struct Bags {
  Tensor row_index;
  Tensor offsets;
};

// Random bags of 0 to max_size rows (some empty), rows drawn with repeats.
Bags RandomBags(int64_t num_bags, int64_t num_rows, int64_t max_size, RandomStream& rng) {
  std::vector<int64_t> index, offsets = {0};
  for (int64_t b = 0; b < num_bags; ++b) {
    const int64_t size = static_cast<int64_t>(rng.NextBelow(max_size + 1));
    for (int64_t k = 0; k < size; ++k)
      index.push_back(static_cast<int64_t>(rng.NextBelow(num_rows)));
    offsets.push_back(static_cast<int64_t>(index.size()));
  }
  return {I64(index), I64(offsets)};
}

std::vector<double> ReferencePooling(const std::vector<double>& rows, int64_t dim, const Bags& bags,
                                     Pooling pooling) {
  const int64_t num_bags = bags.offsets.numel() - 1;
  const int64_t* off = bags.offsets.data<int64_t>();
  const int64_t* idx = bags.row_index.data<int64_t>();
  std::vector<double> out(static_cast<size_t>(num_bags * dim), 0.0);
  for (int64_t b = 0; b < num_bags; ++b) {
    for (int64_t p = off[b]; p < off[b + 1]; ++p) {
      for (int64_t d = 0; d < dim; ++d) out[b * dim + d] += rows[idx[p] * dim + d];
    }
    const int64_t size = off[b + 1] - off[b];
    if (pooling == Pooling::kMean && size > 0) {
      for (int64_t d = 0; d < dim; ++d) out[b * dim + d] /= static_cast<double>(size);
    }
  }
  return out;
}

TEST(EmbeddingBagOpsTest, SumAndMeanPoolEachBagAndAnEmptyBagPoolsToZeros) {
  const Tensor rows = Tensor::FromVector({1, 10, 2, 20, 4, 40}, {3, 2});
  const Tensor row_index = I64({0, 2, 1, 1, 2});
  const Tensor offsets = I64({0, 2, 2, 5});  // bags {0, 2}, {}, {1, 1, 2}
  Tensor out = Tensor::Empty({3, 2});
  ASSERT_TRUE(EmbeddingBagForward(rows, row_index, offsets, Pooling::kSum, &out).ok());
  EXPECT_THAT(Values(out), ElementsAre(5, 50, 0, 0, 8, 80));
  ASSERT_TRUE(EmbeddingBagForward(rows, row_index, offsets, Pooling::kMean, &out).ok());
  EXPECT_THAT(Values(out), ElementsAre(2.5f, 25, 0, 0, 8.0f / 3, 80.0f / 3));
}

TEST(EmbeddingBagOpsTest, BackwardMatchesFiniteDifferences) {
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    for (int64_t num_bags : {1, 3, 17}) {
      for (int64_t dim : {1, 5, 13, 16, 32}) {
        SCOPED_TRACE(::testing::Message() << "mean=" << (pooling == Pooling::kMean)
                                          << " bags=" << num_bags << " D=" << dim);
        RandomStream rng(num_bags * 100 + dim);
        const int64_t num_rows = 7;
        const Bags bags = RandomBags(num_bags, num_rows, 6, rng);
        const Tensor rows = RandomTensor({num_rows, dim}, rng);
        const Tensor dout = RandomTensor({num_bags, dim}, rng);
        Tensor out = Tensor::Empty({num_bags, dim});
        ASSERT_TRUE(EmbeddingBagForward(rows, bags.row_index, bags.offsets, pooling, &out).ok());
        const std::vector<double> r = ToDouble(rows);
        ExpectAllClose(ReferencePooling(r, dim, bags, pooling), out, 1e-5, "out");

        Tensor drows = Tensor::Empty({num_rows, dim});
        ASSERT_TRUE(EmbeddingBagBackward(dout, bags.row_index, bags.offsets, pooling, &drows).ok());
        const std::vector<double> g = ToDouble(dout);
        ExpectAllClose(NumericGradient(
                           [&](const std::vector<double>& v) {
                             return WeightedSum(g, ReferencePooling(v, dim, bags, pooling));
                           },
                           r),
                       drows, 1e-4, "drows");
      }
    }
  }
}

TEST(EmbeddingBagOpsTest, ResultsAreBitIdenticalWithOneAndFourThreads) {
  RandomStream rng(42);
  const int64_t num_rows = 300, num_bags = 4096, dim = 16;
  // Few rows, many bags: every row collects gradients from dozens of bags.
  const Bags bags = RandomBags(num_bags, num_rows, 12, rng);
  const Tensor rows = RandomTensor({num_rows, dim}, rng);
  const Tensor dout = RandomTensor({num_bags, dim}, rng);
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    std::vector<Tensor> outs, drows;
    for (int threads : {1, 4}) {
      ThreadArena arena(threads);
      Tensor out = Tensor::Empty({num_bags, dim});
      Tensor grad = Tensor::Empty({num_rows, dim});
      arena.Execute([&] {
        ASSERT_TRUE(EmbeddingBagForward(rows, bags.row_index, bags.offsets, pooling, &out).ok());
        ASSERT_TRUE(EmbeddingBagBackward(dout, bags.row_index, bags.offsets, pooling, &grad).ok());
      });
      outs.push_back(out);
      drows.push_back(grad);
    }
    EXPECT_EQ(0, std::memcmp(outs[0].raw_data(), outs[1].raw_data(), outs[0].nbytes()));
    EXPECT_EQ(0, std::memcmp(drows[0].raw_data(), drows[1].raw_data(), drows[0].nbytes()));
  }
}

// With ranges, each row's gradient is the ranges' own backward sums added in
// range order (what ranks holding one range each add in rank order), for any
// thread count; one range is the plain backward.
TEST(EmbeddingBagOpsTest, RangesSumPerRangeThenOverRangesInOrder) {
  RandomStream rng(7);
  const int64_t num_rows = 50, slots = 3, examples = 40, dim = 16;
  const Bags bags = RandomBags(examples * slots, num_rows, 4, rng);
  const Tensor dout = RandomTensor({examples * slots, dim}, rng);
  const int64_t* off = bags.offsets.data<int64_t>();
  for (int ranges : {2, 3, 5}) {
    // The reference: each range's bags alone, added in order.
    std::vector<float> expected(static_cast<size_t>(num_rows * dim), 0.0f);
    for (int k = 0; k < ranges; ++k) {
      const int64_t begin = examples * k / ranges * slots, end = examples * (k + 1) / ranges * slots;
      std::vector<int64_t> offsets(off + begin, off + end + 1);
      for (int64_t& o : offsets) o -= off[begin];
      std::vector<int64_t> index(bags.row_index.data<int64_t>() + off[begin],
                                 bags.row_index.data<int64_t>() + off[end]);
      Tensor part_dout = Tensor::Empty({end - begin, dim});
      std::memcpy(part_dout.raw_data(), dout.data<float>() + begin * dim, part_dout.nbytes());
      Tensor part = Tensor::Empty({num_rows, dim});
      ASSERT_TRUE(
          EmbeddingBagBackward(part_dout, I64(index), I64(offsets), Pooling::kSum, &part).ok());
      for (int64_t i = 0; i < num_rows * dim; ++i) {
        expected[i] = k == 0 ? part.data<float>()[i] : expected[i] + part.data<float>()[i];
      }
    }
    for (int threads : {1, 3}) {
      ThreadArena arena(threads);
      Tensor grad = Tensor::Empty({num_rows, dim});
      arena.Execute([&] {
        ASSERT_TRUE(EmbeddingBagBackward(dout, bags.row_index, bags.offsets, Pooling::kSum, &grad,
                                         ranges, slots)
                        .ok());
      });
      EXPECT_EQ(0, std::memcmp(expected.data(), grad.raw_data(), grad.nbytes()))
          << ranges << " ranges, " << threads << " threads";
    }
  }
  Tensor whole = Tensor::Empty({num_rows, dim}), one = Tensor::Empty({num_rows, dim});
  ASSERT_TRUE(EmbeddingBagBackward(dout, bags.row_index, bags.offsets, Pooling::kSum, &whole).ok());
  ASSERT_TRUE(
      EmbeddingBagBackward(dout, bags.row_index, bags.offsets, Pooling::kSum, &one, 1, slots).ok());
  EXPECT_EQ(0, std::memcmp(whole.raw_data(), one.raw_data(), one.nbytes()));
  Tensor bad = Tensor::Empty({num_rows, dim});
  EXPECT_THAT(EmbeddingBagBackward(dout, bags.row_index, bags.offsets, Pooling::kSum, &bad, 2, 7)
                  .message(),
              HasSubstr("bags are not examples of 7 bags"));
}

// Widths that are multiples of 16 take a vector path; its sums must be the
// scalar path's to the bit. The scalar path runs on one more column: the
// columns both have must agree exactly.
TEST(EmbeddingBagOpsTest, TheVectorPathSumsExactlyAsTheScalarPath) {
  RandomStream rng(7);
  const int64_t num_rows = 50, num_bags = 600;
  const Bags bags = RandomBags(num_bags, num_rows, 5, rng);
  for (int64_t dim : {16, 32}) {
    const int64_t wide = dim + 1;
    const Tensor rows_wide = RandomTensor({num_rows, wide}, rng);
    const Tensor dout_wide = RandomTensor({num_bags, wide}, rng);
    Tensor rows = Tensor::Empty({num_rows, dim}), dout = Tensor::Empty({num_bags, dim});
    for (int64_t r = 0; r < num_rows; ++r) {
      std::memcpy(rows.data<float>() + r * dim, rows_wide.data<float>() + r * wide,
                  dim * sizeof(float));
    }
    for (int64_t b = 0; b < num_bags; ++b) {
      std::memcpy(dout.data<float>() + b * dim, dout_wide.data<float>() + b * wide,
                  dim * sizeof(float));
    }
    for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
      SCOPED_TRACE(::testing::Message() << "D=" << dim << " mean=" << (pooling == Pooling::kMean));
      Tensor out = Tensor::Empty({num_bags, dim}), out_wide = Tensor::Empty({num_bags, wide});
      Tensor drows = Tensor::Empty({num_rows, dim}), drows_wide = Tensor::Empty({num_rows, wide});
      ASSERT_TRUE(EmbeddingBagForward(rows, bags.row_index, bags.offsets, pooling, &out).ok());
      ASSERT_TRUE(
          EmbeddingBagForward(rows_wide, bags.row_index, bags.offsets, pooling, &out_wide).ok());
      ASSERT_TRUE(EmbeddingBagBackward(dout, bags.row_index, bags.offsets, pooling, &drows).ok());
      ASSERT_TRUE(
          EmbeddingBagBackward(dout_wide, bags.row_index, bags.offsets, pooling, &drows_wide).ok());
      for (int64_t b = 0; b < num_bags; ++b) {
        ASSERT_EQ(0, std::memcmp(out.data<float>() + b * dim, out_wide.data<float>() + b * wide,
                                 dim * sizeof(float)))
            << "bag " << b;
      }
      for (int64_t r = 0; r < num_rows; ++r) {
        ASSERT_EQ(0, std::memcmp(drows.data<float>() + r * dim,
                                 drows_wide.data<float>() + r * wide, dim * sizeof(float)))
            << "row " << r;
      }
    }
  }
}

TEST(EmbeddingBagOpsTest, RowIndexOutsideTheTableIsInvalidArgument) {
  const Tensor rows = Tensor::Zeros({3, 2});
  const Tensor offsets = I64({0, 3});
  Tensor out = Tensor::Empty({1, 2});
  Status status = EmbeddingBagForward(rows, I64({0, 1, 3}), offsets, Pooling::kSum, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("row_index[2] = 3"));

  status = EmbeddingBagForward(rows, I64({0, -1, 2}), offsets, Pooling::kSum, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("row_index[1] = -1"));

  Tensor drows = Tensor::Empty({3, 2});
  status =
      EmbeddingBagBackward(Tensor::Zeros({1, 2}), I64({0, 1, 3}), offsets, Pooling::kSum, &drows);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("row_index[2]"));
}

TEST(EmbeddingBagOpsTest, MalformedOffsetsAndShapesAreInvalidArguments) {
  const Tensor rows = Tensor::Zeros({3, 2});
  const Tensor row_index = I64({0, 1, 2});
  Tensor out = Tensor::Empty({2, 2});
  Status status = EmbeddingBagForward(rows, row_index, I64({0, 2, 1}), Pooling::kSum, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("decrease"));

  status = EmbeddingBagForward(rows, row_index, I64({0, 1, 2}), Pooling::kSum, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("offsets[2] = 2"));

  status = EmbeddingBagForward(rows, Tensor::Zeros({3}), I64({0, 1, 3}), Pooling::kSum, &out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("row_index"));

  Tensor wrong_out = Tensor::Empty({3, 2});
  status = EmbeddingBagForward(rows, row_index, I64({0, 1, 3}), Pooling::kSum, &wrong_out);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("out must be f32[2, 2]"));

  Tensor drows = Tensor::Empty({3, 5});
  status =
      EmbeddingBagBackward(Tensor::Zeros({2, 2}), row_index, I64({0, 1, 3}), Pooling::kSum, &drows);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("drows"));
}

}  // namespace
}  // namespace ember::ops
