#include "tests/testing/dense_reproducibility.h"

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/dense_ops.h"

namespace ember::test {
namespace {

constexpr int64_t kRows = 257, kIn = 64, kOut = 32;

Tensor Random(std::vector<int64_t> shape, RandomStream& random) {
  Tensor t = Tensor::Zeros(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data<float>()[i] = static_cast<float>(random.Uniform(-1, 1));
  }
  return t;
}

// y for rows [begin, end) of x, computed on a thread of its own with
// `threads` OpenMP and arena threads.
std::vector<float> Forward(const Tensor& x, const Tensor& w, const Tensor& b, int64_t begin,
                           int64_t end, int threads) {
  std::vector<float> y;
  std::thread([&] {
    SetOpenMpThreads(threads);
    ThreadArena(threads).Execute([&] {
      Tensor part = Tensor::Zeros({end - begin, kIn});
      std::memcpy(part.data<float>(), x.data<float>() + begin * kIn,
                  sizeof(float) * (end - begin) * kIn);
      Tensor out = Tensor::Zeros({end - begin, kOut});
      if (ops::FullyConnectedForward(part, w, b, ops::Activation::kRelu, &out).ok()) {
        y.assign(out.data<float>(), out.data<float>() + out.numel());
      }
    });
  }).join();
  return y;
}

bool Probe() {
  RandomStream random(17, 0);
  const Tensor x = Random({kRows, kIn}, random);
  const Tensor w = Random({kOut, kIn}, random);
  const Tensor b = Random({kOut}, random);
  const std::vector<float> whole = Forward(x, w, b, 0, kRows, 1);
  if (whole.size() != static_cast<size_t>(kRows * kOut)) return false;
  std::vector<std::vector<float>> others = {Forward(x, w, b, 0, kRows, 2),
                                            Forward(x, w, b, 0, kRows, 3)};
  std::vector<float> parts = Forward(x, w, b, 0, 100, 1);
  const std::vector<float> rest = Forward(x, w, b, 100, kRows, 2);
  parts.insert(parts.end(), rest.begin(), rest.end());
  others.push_back(parts);
  for (const std::vector<float>& other : others) {
    if (other.size() != whole.size() ||
        std::memcmp(other.data(), whole.data(), sizeof(float) * whole.size()) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool DenseRowsAreReproducible() {
  static const bool reproducible = [] {
    const bool result = Probe();
    if (!result) {
      std::fprintf(stderr,
                   "[dense_reproducibility] this CPU's f32 products depend on the thread count "
                   "and the rows of a call (oneDNN without AVX-512): bitwise checks across "
                   "schedules, ranks and thread counts compare within a tolerance instead\n");
    }
    return result;
  }();
  return reproducible;
}

}  // namespace ember::test
