// The initial value of a row: the formula row_init.h documents, bit for bit.

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/random.h"
#include "embedding/row_init.h"

namespace ember::embedding {
namespace {

// row_init.h's definition, element by element in double.
float Documented(uint64_t seed, Key key, float scale, int e) {
  const double s = scale;
  return static_cast<float>(s * (2.0 * UniformAt(seed, key, static_cast<uint64_t>(e)) - 1.0));
}

TEST(InitRowWeightsTest, IsTheDocumentedFormulaBitForBit) {
  // Widths below, at and past the 256 elements whose index mix is a table,
  // and odd ones that end in a partial vector.
  for (int dim : {1, 7, 16, 17, 64, 255, 256, 257, 300}) {
    for (uint64_t seed : {0ULL, 42ULL, ~0ULL}) {
      for (Key key : {Key{0}, Key{1}, Key{123456789}, ~Key{0}}) {
        const float scale = dim == 7 ? 0.01f : 0.25f;
        std::vector<float> row(dim + 1, -7.0f);
        InitRowWeights(seed, key, scale, dim, row.data());
        for (int e = 0; e < dim; ++e) {
          const float want = Documented(seed, key, scale, e);
          ASSERT_EQ(row[e], want) << "dim " << dim << " seed " << seed << " key " << key
                                  << " element " << e;
          ASSERT_LE(row[e], scale);
          ASSERT_GE(row[e], -scale);
        }
        EXPECT_EQ(row[dim], -7.0f) << "wrote past dim " << dim;
      }
    }
  }
}

TEST(InitRowWeightsTest, DiffersAcrossKeysSeedsAndElements) {
  std::vector<float> a(16), b(16), c(16);
  InitRowWeights(1, 10, 0.25f, 16, a.data());
  InitRowWeights(1, 11, 0.25f, 16, b.data());
  InitRowWeights(2, 10, 0.25f, 16, c.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  int distinct = 0;
  for (int e = 1; e < 16; ++e) distinct += a[e] != a[0];
  EXPECT_EQ(distinct, 15);
}

// Pinned, with InitScale's 1/sqrt(dim) (0.5 for dim 4): a row's first value
// must never change, and tools/bench/ember_random.py reproduces it (the PyTorch
// baseline starts from Ember's rows; tests/tools/bench_data_test.py pins the
// same numbers).
TEST(InitRowWeightsTest, RowsArePinnedAcrossMachinesAndReleases) {
  EmbeddingTableOptions options;
  options.dim = 4;
  ASSERT_EQ(0.5f, InitScale(options));
  std::vector<float> row(4);
  InitRowWeights(1, 123456789, InitScale(options), 4, row.data());
  EXPECT_EQ((std::vector<float>{-0.00440706965f, 0.339627832f, 0.0832804963f, -0.466210991f}), row);
}

}  // namespace
}  // namespace ember::embedding
