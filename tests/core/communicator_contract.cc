// The contract of core/communicator.h, run against every backend that
// instantiates CommunicatorContractTest (see communicator_contract.h).

#include "tests/core/communicator_contract.h"

#include <gmock/gmock.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"

namespace ember::test {

void PrintTo(const CommunicatorBackend& backend, std::ostream* out) { *out << backend.name; }

std::string BackendName(const ::testing::TestParamInfo<CommunicatorBackend>& info) {
  return info.param.name;
}

void OnEveryRank(const Communicators& comms, const std::function<void(Communicator&)>& body) {
  std::vector<std::thread> threads;
  for (const auto& comm : comms) {
    if (comm != nullptr) threads.emplace_back([&body, c = comm.get()] { body(*c); });
  }
  for (std::thread& thread : threads) thread.join();
}

void SendAroundTheRingThenRecvTagsOutOfOrder(Communicator& comm) {
  const int r = comm.rank(), n = comm.size(), next = (r + 1) % n, prev = (r + n - 1) % n;
  ASSERT_TRUE(comm.Send(std::vector<int32_t>{r, 1}, next, 1).ok());
  ASSERT_TRUE(comm.Send(std::vector<int32_t>{r, 2}, next, 2).ok());
  std::vector<int32_t> second(2), first(2);
  ASSERT_TRUE(comm.Recv(second, prev, 2).ok());
  ASSERT_TRUE(comm.Recv(first, prev, 1).ok());
  EXPECT_EQ((std::vector<int32_t>{prev, 2}), second);
  EXPECT_EQ((std::vector<int32_t>{prev, 1}), first);
}

void CommunicatorContractTest::SetUp() {
  if (GetParam().unavailable) {
    const std::string reason = GetParam().unavailable(ranks());
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
}

void CommunicatorContractTest::OnEveryRank(const Communicators& comms,
                                           const std::function<void(Communicator&)>& body) {
  test::OnEveryRank(comms, body);
  if (GetParam().sync_processes) GetParam().sync_processes();
}

Communicators CommunicatorContractTest::MakeGroup(const CommunicatorOptions& options) {
  auto comms = GetParam().make(ranks(), options);
  EXPECT_TRUE(comms.ok()) << comms.status();
  if (!comms.ok()) return {};
  return std::move(comms).value();
}

namespace {

using ::testing::HasSubstr;

// Values of spread magnitudes and signs, so that float sums depend on order.
template <typename F>
F OrderSensitiveValue(int rank, int64_t i) {
  uint64_t h = (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^
               (static_cast<uint64_t>(i) + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  const F mantissa = F(1) + static_cast<F>(h & 0xFFFFFF) / F(16777216);
  const int exponent = static_cast<int>((h >> 24) % 48) - 24;
  return ((h >> 40) & 1 ? F(-1) : F(1)) * std::ldexp(mantissa, exponent);
}

template <typename F>
std::vector<uint64_t> BitsOf(const std::vector<F>& values) {
  std::vector<uint64_t> bits;
  for (F value : values) {
    uint64_t word = 0;
    std::memcpy(&word, &value, sizeof(F));
    bits.push_back(word);
  }
  return bits;
}

// The sum over ranks 0, 1, ..., n-1 in that order of order-sensitive values,
// which AllReduce must equal bit for bit; for 3 ranks or more and
// `check_order`, it also checks that another order would give other bits, so
// the check has teeth (a few elements may not depend on the order).
template <typename F>
std::vector<F> RankOrderedSum(int n, int64_t count, bool check_order = true) {
  std::vector<F> expected(count), reversed(count);
  for (int64_t i = 0; i < count; ++i) {
    F sum = OrderSensitiveValue<F>(0, i);
    for (int r = 1; r < n; ++r) sum += OrderSensitiveValue<F>(r, i);
    F backwards = OrderSensitiveValue<F>(n - 1, i);
    for (int r = n - 2; r >= 0; --r) backwards += OrderSensitiveValue<F>(r, i);
    expected[i] = sum;
    reversed[i] = backwards;
  }
  if (n >= 3 && check_order) {
    EXPECT_NE(BitsOf(expected), BitsOf(reversed)) << "values do not depend on order";
  }
  return expected;
}

template <typename F>
void ExpectAllReduceGives(Communicator& comm, const std::vector<F>& expected) {
  const int64_t count = static_cast<int64_t>(expected.size());
  std::vector<F> in(count), out(count);
  for (int64_t i = 0; i < count; ++i) in[i] = OrderSensitiveValue<F>(comm.rank(), i);
  const Status status = comm.AllReduce(in, out);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(BitsOf(expected), BitsOf(out)) << "rank " << comm.rank();
}

// Elements that rank p sends rank q in the AllToAllV tests: uneven, and zero
// for some pairs (0 -> 1 among them).
int64_t PairCount(int p, int q) { return (p + 2 * q + 1) % 3; }

uint64_t KeyOf(int p, int q, int64_t j) {
  return (uint64_t{1} << 63) | (static_cast<uint64_t>(p) << 40) | (static_cast<uint64_t>(q) << 20) |
         static_cast<uint64_t>(j);
}

TEST_P(CommunicatorContractTest, RanksAreNumberedFromZeroToSize) {
  Communicators comms = MakeGroup();
  ASSERT_EQ(static_cast<size_t>(ranks()), comms.size());
  int here = 0;
  for (int r = 0; r < ranks(); ++r) {
    if (comms[r] == nullptr) continue;  // Another process holds it.
    ++here;
    EXPECT_EQ(r, comms[r]->rank());
    EXPECT_EQ(ranks(), comms[r]->size());
  }
  EXPECT_LE(1, here);
}

TEST_P(CommunicatorContractTest, SendAndRecvPassActivationsDownAndGradientsUpAChain) {
  if (ranks() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  constexpr int kForwardTag = 1, kBackwardTag = 2;
  OnEveryRank(comms, [&](Communicator& comm) {
    const int r = comm.rank(), last = comm.size() - 1;
    // Forward: each stage adds its rank to the activations of the previous one.
    std::vector<float> activations(5, 0.0f);
    if (r > 0) {
      ASSERT_TRUE(comm.Recv(activations, r - 1, kForwardTag).ok());
    }
    for (float& a : activations) a = a * 2.0f + static_cast<float>(r);
    if (r < last) {
      ASSERT_TRUE(comm.Send(activations, r + 1, kForwardTag).ok());
    }
    // Backward, on another tag: i64 gradients travel back up.
    std::vector<int64_t> gradients(3, 0);
    if (r < last) {
      ASSERT_TRUE(comm.Recv(gradients, r + 1, kBackwardTag).ok());
    }
    for (int64_t& g : gradients) g = g * 10 + r;
    if (r > 0) {
      ASSERT_TRUE(comm.Send(gradients, r - 1, kBackwardTag).ok());
    }
    float expected_activation = 0.0f;
    for (int s = 0; s <= r; ++s) expected_activation = expected_activation * 2.0f + s;
    EXPECT_EQ(std::vector<float>(5, expected_activation), activations) << "rank " << r;
    int64_t expected_gradient = 0;
    for (int s = last; s >= r; --s) expected_gradient = expected_gradient * 10 + s;
    EXPECT_EQ(std::vector<int64_t>(3, expected_gradient), gradients) << "rank " << r;
  });
}

TEST_P(CommunicatorContractTest, AllReduceEqualsTheRankOrderedSequentialSumBitForBit) {
  Communicators comms = MakeGroup();
  const std::vector<float> floats = RankOrderedSum<float>(ranks(), 1000);
  const std::vector<double> doubles = RankOrderedSum<double>(ranks(), 257);
  OnEveryRank(comms, [&](Communicator& comm) {
    ExpectAllReduceGives(comm, floats);
    ExpectAllReduceGives(comm, doubles);
  });
}

TEST_P(CommunicatorContractTest, AllReduceSumsIntegersWrappingAndWorksInPlace) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max() - 5;
  OnEveryRank(comms, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<int64_t> signed_values = {kBig, -r, r * int64_t{1000}};
    ASSERT_TRUE(comm.AllReduce(signed_values, signed_values).ok());
    uint64_t wrapped = 0;
    for (int s = 0; s < n; ++s) wrapped += static_cast<uint64_t>(kBig);
    EXPECT_EQ(static_cast<int64_t>(wrapped), signed_values[0]);
    EXPECT_EQ(-n * (n - 1) / 2, signed_values[1]);
    EXPECT_EQ(int64_t{1000} * n * (n - 1) / 2, signed_values[2]);
    std::vector<uint64_t> keys = {KeyOf(r, 0, 1)};
    std::vector<int32_t> counts = {r + 1};
    ASSERT_TRUE(comm.AllReduce(keys, keys).ok());
    ASSERT_TRUE(comm.AllReduce(counts, counts).ok());
    uint64_t key_sum = 0;
    for (int s = 0; s < n; ++s) key_sum += KeyOf(s, 0, 1);
    EXPECT_EQ(std::vector<uint64_t>{key_sum}, keys);
    EXPECT_EQ(std::vector<int32_t>{n * (n + 1) / 2}, counts);
  });
}

TEST_P(CommunicatorContractTest, AllReduceOfEveryLengthEqualsTheRankOrderedSum) {
  // Lengths around the rank count: blocks of the bandwidth-optimal
  // all-reduce that are uneven, empty, or of one element.
  Communicators comms = MakeGroup();
  const int n = ranks();
  const std::vector<int64_t> counts = {0, 1, n - 1, n + 1, 3 * n + 2};
  for (int64_t count : counts) {
    const std::vector<float> expected = RankOrderedSum<float>(n, count, /*check_order=*/false);
    OnEveryRank(comms, [&](Communicator& comm) {
      std::vector<float> values(count);
      for (int64_t i = 0; i < count; ++i) values[i] = OrderSensitiveValue<float>(comm.rank(), i);
      const Status status = comm.AllReduce(values, values);  // In place.
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(BitsOf(expected), BitsOf(values)) << "rank " << comm.rank() << ", " << count;
    });
  }
}

TEST_P(CommunicatorContractTest, ReduceScatterGivesEachRankTheRankOrderedSumOfItsBlock) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  constexpr int64_t kBlock = 333;
  const std::vector<float> floats = RankOrderedSum<float>(n, n * kBlock);
  const std::vector<double> doubles = RankOrderedSum<double>(n, n * 5);
  OnEveryRank(comms, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> in(n * kBlock), out(kBlock);
    for (int64_t i = 0; i < n * kBlock; ++i) in[i] = OrderSensitiveValue<float>(r, i);
    Status status = comm.ReduceScatter(in, out);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(BitsOf(std::vector<float>(floats.begin() + r * kBlock,
                                        floats.begin() + (r + 1) * kBlock)),
              BitsOf(out))
        << "rank " << r;
    std::vector<double> in64(n * 5), out64(5);
    for (int64_t i = 0; i < n * 5; ++i) in64[i] = OrderSensitiveValue<double>(r, i);
    ASSERT_TRUE(comm.ReduceScatter(in64, out64).ok());
    EXPECT_EQ(BitsOf(std::vector<double>(doubles.begin() + r * 5, doubles.begin() + (r + 1) * 5)),
              BitsOf(out64));
    std::vector<int64_t> counts(n, r + 1), count(1);
    ASSERT_TRUE(comm.ReduceScatter(counts, count).ok());
    EXPECT_EQ(int64_t{n} * (n + 1) / 2, count[0]);
    std::vector<float> none, none_out;
    EXPECT_TRUE(comm.ReduceScatter(none, none_out).ok()) << "an empty reduce-scatter";
    // Invalid on every rank: all fail, and stay in step.
    std::vector<float> wrong(n * kBlock + 1);
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.ReduceScatter(wrong, out).code());
    std::vector<Half> halves(n), half(1);
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.ReduceScatter(halves, half).code());
    EXPECT_TRUE(comm.Barrier().ok());
  });
}

TEST_P(CommunicatorContractTest, CollectivesSendNoMoreThanTheirBandwidthBound) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  constexpr int64_t kFloats = 30000;
  constexpr int64_t kHeaderBytes = 64;  // Per message, an upper bound.
  OnEveryRank(comms, [&](Communicator& comm) {
    const std::optional<CommCounters> before = comm.counters();
    if (!before) return;  // This backend does not count (nothing travels, or the device moves it).
    std::vector<float> grads(kFloats, 1.0f);
    ASSERT_TRUE(comm.AllReduce(grads, grads).ok());
    const CommCounters after = *comm.counters();
    const int64_t bytes = after.bytes_sent - before->bytes_sent;
    const int64_t data_bytes = kFloats * static_cast<int64_t>(sizeof(float));
    // 2 (N-1)/N x size: each rank sends its N-1 foreign blocks, then its own
    // summed block to each of the N-1 others.
    const int64_t bound = 2 * (n - 1) * data_bytes / n + 2 * (n - 1) * (kHeaderBytes + 4);
    EXPECT_LE(bytes, bound) << "rank " << comm.rank() << " of " << n;
    EXPECT_GE(bytes, 2 * (n - 1) * data_bytes / n - 2 * (n - 1) * 4) << "counters count the data";
    EXPECT_EQ(2 * (n - 1), after.messages_sent - before->messages_sent);
    std::vector<float> block(kFloats / n);
    std::vector<float> whole(block.size() * n, 1.0f);
    const CommCounters mid = *comm.counters();
    ASSERT_TRUE(comm.ReduceScatter(whole, block).ok());
    const int64_t scatter = comm.counters()->bytes_sent - mid.bytes_sent;
    EXPECT_LE(scatter, (n - 1) * static_cast<int64_t>(block.size() * sizeof(float)) +
                           (n - 1) * kHeaderBytes);
  });
}

TEST_P(CommunicatorContractTest, AllGatherConcatenatesInRankOrder) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  OnEveryRank(comms, [&](Communicator& comm) {
    const int r = comm.rank();
    const std::vector<uint64_t> mine = {KeyOf(r, 0, 0), KeyOf(r, 0, 1), KeyOf(r, 0, 2)};
    std::vector<uint64_t> all(3 * n);
    ASSERT_TRUE(comm.AllGather(mine, all).ok());
    std::vector<uint64_t> expected;
    for (int s = 0; s < n; ++s) {
      for (int j = 0; j < 3; ++j) expected.push_back(KeyOf(s, 0, j));
    }
    EXPECT_EQ(expected, all) << "rank " << r;
    std::vector<float> none;
    std::vector<float> all_none;
    EXPECT_TRUE(comm.AllGather(none, all_none).ok()) << "an empty all-gather";
  });
}

TEST_P(CommunicatorContractTest, AllToAllVMovesUnevenAndZeroBlocksToTheirRanks) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  OnEveryRank(comms, [&](Communicator& comm) {
    const int p = comm.rank();
    std::vector<int64_t> send_counts(n), recv_counts(n);
    std::vector<uint64_t> keys;
    std::vector<float> rows;
    for (int q = 0; q < n; ++q) {
      send_counts[q] = PairCount(p, q);
      recv_counts[q] = PairCount(q, p);
      for (int64_t j = 0; j < send_counts[q]; ++j) {
        keys.push_back(KeyOf(p, q, j));
        rows.push_back(static_cast<float>(p * 1000 + q * 100 + j) + 0.25f);
      }
    }
    std::vector<uint64_t> received_keys;
    std::vector<float> expected_rows;
    for (int q = 0; q < n; ++q) {
      for (int64_t j = 0; j < recv_counts[q]; ++j) {
        received_keys.push_back(KeyOf(q, p, j));
        expected_rows.push_back(static_cast<float>(q * 1000 + p * 100 + j) + 0.25f);
      }
    }
    const std::vector<uint64_t> expected_keys = received_keys;
    std::fill(received_keys.begin(), received_keys.end(), 0);
    std::vector<float> received_rows(expected_rows.size(), -1.0f);
    ASSERT_TRUE(comm.AllToAllV(keys, send_counts, received_keys, recv_counts).ok());
    ASSERT_TRUE(comm.AllToAllV(rows, send_counts, received_rows, recv_counts).ok());
    EXPECT_EQ(expected_keys, received_keys) << "rank " << p;
    EXPECT_EQ(expected_rows, received_rows) << "rank " << p;
    // A step in which no rank sends anything.
    const std::vector<int64_t> zeros(n, 0);
    std::vector<float> nothing;
    EXPECT_TRUE(comm.AllToAllV(nothing, zeros, nothing, zeros).ok());
  });
}

TEST_P(CommunicatorContractTest, AllToAllVUnknownCountsLearnsWhatEachRankSends) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  OnEveryRank(comms, [&](Communicator& comm) {
    const int p = comm.rank();
    std::vector<int64_t> send_counts(n);
    std::vector<uint64_t> keys;
    for (int q = 0; q < n; ++q) {
      send_counts[q] = (p * 3 + q) % 4;
      for (int64_t j = 0; j < send_counts[q]; ++j) keys.push_back(KeyOf(p, q, j));
    }
    std::vector<uint64_t> received;
    std::vector<int64_t> recv_counts;
    ASSERT_TRUE(AllToAllVUnknownCounts(comm, keys, send_counts, &received, &recv_counts).ok());
    std::vector<int64_t> expected_counts(n);
    std::vector<uint64_t> expected;
    for (int q = 0; q < n; ++q) {
      expected_counts[q] = (q * 3 + p) % 4;
      for (int64_t j = 0; j < expected_counts[q]; ++j) expected.push_back(KeyOf(q, p, j));
    }
    EXPECT_EQ(expected_counts, recv_counts) << "rank " << p;
    EXPECT_EQ(expected, received) << "rank " << p;
  });
}

TEST_P(CommunicatorContractTest, BroadcastCopiesTheRootsDataEverywhere) {
  Communicators comms = MakeGroup();
  const int root = ranks() - 1;  // Not rank 0 whenever there are two ranks.
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<double> data(7, -1.0);
    if (comm.rank() == root) {
      for (int i = 0; i < 7; ++i) data[i] = OrderSensitiveValue<double>(root, i);
    }
    ASSERT_TRUE(comm.Broadcast(data, root).ok());
    for (int i = 0; i < 7; ++i) {
      EXPECT_EQ(OrderSensitiveValue<double>(root, i), data[i]) << "rank " << comm.rank();
    }
  });
}

TEST_P(CommunicatorContractTest, BarrierReturnsOnlyOnceEveryRankHasArrived) {
  Communicators comms = MakeGroup();
  constexpr int kRounds = 20;
  // Arrivals are counted in memory when this process holds every rank, and
  // as marks in the shared directory when ranks live in other processes.
  std::vector<std::atomic<int>> arrived(kRounds);
  const std::filesystem::path dir = GetParam().shared_dir;
  if (GetParam().sync_processes) {
    ASSERT_FALSE(dir.empty()) << "the backend needs a shared_dir";
  }
  auto mark = [&](int round, int rank) {
    return dir /
           (GetParam().name + "-barrier-" + std::to_string(round) + "-" + std::to_string(rank));
  };
  OnEveryRank(comms, [&](Communicator& comm) {
    for (int round = 0; round < kRounds; ++round) {
      if (dir.empty()) {
        arrived[round].fetch_add(1);
      } else {
        std::ofstream(mark(round, comm.rank())).put('x');
      }
      ASSERT_TRUE(comm.Barrier().ok());
      int count = arrived[round].load();
      if (!dir.empty()) {
        for (int r = 0; r < comm.size(); ++r) count += std::filesystem::exists(mark(round, r));
      }
      EXPECT_EQ(comm.size(), count) << "round " << round;
    }
  });
}

TEST_P(CommunicatorContractTest, ManyCollectivesInARowStayInStep) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  OnEveryRank(comms, [&](Communicator& comm) {
    const int r = comm.rank();
    for (int step = 0; step < 200; ++step) {
      std::vector<int64_t> sum = {r + step, 1};
      ASSERT_TRUE(comm.AllReduce(sum, sum).ok()) << "step " << step;
      ASSERT_EQ((std::vector<int64_t>{n * (n - 1) / 2 + int64_t{n} * step, n}), sum);
      std::vector<int32_t> all(n);
      ASSERT_TRUE(comm.AllGather(std::vector<int32_t>{r * step}, all).ok());
      for (int s = 0; s < n; ++s) ASSERT_EQ(s * step, all[s]) << "step " << step;
      const int root = step % n;
      std::vector<float> value = {r == root ? static_cast<float>(step) : -1.0f};
      ASSERT_TRUE(comm.Broadcast(value, root).ok());
      ASSERT_EQ(static_cast<float>(step), value[0]);
      if (step % 10 == 0) {
        ASSERT_TRUE(comm.Barrier().ok());
      }
    }
  });
}

TEST_P(CommunicatorContractTest, TensorContentsArriveExactly) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  OnEveryRank(comms, [&](Communicator& comm) {
    const int r = comm.rank();
    Tensor grads = Tensor::Empty({3, 4});
    for (int64_t i = 0; i < 12; ++i) grads.data<float>()[i] = OrderSensitiveValue<float>(r, i);
    ASSERT_TRUE(comm.AllReduce(grads, grads).ok());
    for (int64_t i = 0; i < 12; ++i) {
      float expected = OrderSensitiveValue<float>(0, i);
      for (int s = 1; s < n; ++s) expected += OrderSensitiveValue<float>(s, i);
      EXPECT_EQ(BitsOf(std::vector<float>{expected}),
                BitsOf(std::vector<float>{grads.data<float>()[i]}));
    }
    Tensor ids = Tensor::Empty({2, 3}, DType::kI64);
    for (int64_t i = 0; i < 6; ++i) ids.data<int64_t>()[i] = r * 100 + i;
    Tensor all = Tensor::Zeros({2 * n, 3}, DType::kI64);
    ASSERT_TRUE(comm.AllGather(ids, all).ok());
    for (int s = 0; s < n; ++s) {
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(s * 100 + i, all.data<int64_t>()[s * 6 + i]);
    }
  });
}

TEST_P(CommunicatorContractTest, InvalidArgumentsFailAndTheRanksStayInStep) {
  Communicators comms = MakeGroup();
  const int n = ranks();
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<float> data(4, 1.0f), too_small(1);
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.Send(data, comm.rank(), 0).code());
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.Recv(data, n, 0).code());
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.Send(data, (comm.rank() + 1) % n, -1).code());
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.AllGather(data, too_small).code());
    EXPECT_EQ(StatusCode::kInvalidArgument,
              comm.AllToAllV(data, {4}, data, std::vector<int64_t>(n + 1, 0)).code());
    std::vector<Half> halves(4);
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.AllReduce(halves, halves).code());
    EXPECT_EQ(StatusCode::kInvalidArgument, comm.Broadcast(data, n).code());
    EXPECT_TRUE(comm.Barrier().ok());
  });
}

TEST_P(CommunicatorContractTest, APeerThatNeverJoinsMakesTheCollectiveFailNamingIt) {
  if (ranks() < 2) GTEST_SKIP() << "needs two ranks";
  CommunicatorOptions options;
  options.timeout_seconds = 0.5;
  Communicators comms = MakeGroup(options);
  const int silent = ranks() - 1;
  OnEveryRank(comms, [&](Communicator& comm) {
    if (comm.rank() == silent) return;
    std::vector<float> data(8, 1.0f);
    const Status status = comm.AllReduce(data, data);
    EXPECT_EQ(StatusCode::kDeadlineExceeded, status.code()) << status;
    EXPECT_THAT(status.message(), HasSubstr("all_reduce #1"));
    EXPECT_THAT(status.message(), HasSubstr("within 0.5 s"));
    if (GetParam().timeout_names_missing_rank) {
      EXPECT_THAT(status.message(),
                  HasSubstr("rank " + std::to_string(silent) + " did not answer"));
    }
  });
}

TEST_P(CommunicatorContractTest, APeerThatNeverSendsMakesTheRecvFailNamingIt) {
  if (ranks() < 2) GTEST_SKIP() << "needs two ranks";
  CommunicatorOptions options;
  options.timeout_seconds = 0.5;
  Communicators comms = MakeGroup(options);
  OnEveryRank(comms, [&](Communicator& comm) {
    if (comm.rank() != 0) return;
    std::vector<float> data(8);
    const Status status = comm.Recv(data, 1, 5);
    EXPECT_EQ(StatusCode::kDeadlineExceeded, status.code()) << status;
    EXPECT_THAT(status.message(), HasSubstr("recv from rank 1 (tag 5): rank 1 did not answer"));
  });
}

TEST_P(CommunicatorContractTest, APeerThatAbortsMakesTheOthersFailNamingIt) {
  if (ranks() < 2) GTEST_SKIP() << "needs two ranks";
  CommunicatorOptions options;
  // Backends that report an abort at once must not need the timeout: a long
  // one shows it (the ctest TIMEOUT catches a hang).
  options.timeout_seconds = GetParam().abort_reaches_peers ? 120 : 0.5;
  Communicators comms = MakeGroup(options);
  const int quitter = ranks() - 1;
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<double> data(8, 1.0);
    if (comm.rank() == quitter) {
      comm.Abort(Status::IOError("disk full"));
      EXPECT_EQ(StatusCode::kCancelled, comm.AllReduce(data, data).code());
      return;
    }
    const Status status = comm.AllReduce(data, data);
    EXPECT_FALSE(status.ok());
    if (GetParam().abort_reaches_peers) {
      EXPECT_EQ(StatusCode::kUnavailable, status.code()) << status;
      EXPECT_THAT(status.message(), HasSubstr("rank " + std::to_string(quitter) + " left"));
      EXPECT_THAT(status.message(), HasSubstr("disk full"));
    }
  });
}

TEST_P(CommunicatorContractTest, AbortFromAnotherThreadEndsTheRanksBlockedCall) {
  if (ranks() < 2) GTEST_SKIP() << "needs two ranks";
  CommunicatorOptions options;
  options.timeout_seconds = 120;
  Communicators comms = MakeGroup(options);
  OnEveryRank(comms, [&](Communicator& comm) {
    if (comm.rank() != 0) return;
    Status status;
    std::thread receiver([&] {
      std::vector<float> data(4);
      status = comm.Recv(data, 1, 0);  // Rank 1 never sends.
    });
    comm.Abort(Status::Cancelled("the pipeline is shutting down"));
    receiver.join();
    EXPECT_EQ(StatusCode::kCancelled, status.code()) << status;
    EXPECT_THAT(status.message(), HasSubstr("the pipeline is shutting down"));
  });
}

TEST_P(CommunicatorContractTest, ADestroyedPeerMakesTheOthersFailNamingIt) {
  if (ranks() < 2) GTEST_SKIP() << "needs two ranks";
  CommunicatorOptions options;
  options.timeout_seconds = GetParam().abort_reaches_peers ? 120 : 0.5;
  Communicators comms = MakeGroup(options);
  const int gone = ranks() - 1;
  comms[gone].reset();
  OnEveryRank(comms, [&](Communicator& comm) {
    const Status status = comm.Barrier();
    EXPECT_FALSE(status.ok());
    if (GetParam().abort_reaches_peers) {
      EXPECT_EQ(StatusCode::kUnavailable, status.code()) << status;
      EXPECT_THAT(status.message(), HasSubstr("rank " + std::to_string(gone) + " left"));
    }
  });
}

}  // namespace
}  // namespace ember::test
