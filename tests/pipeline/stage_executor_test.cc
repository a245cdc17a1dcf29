#include "pipeline/stage_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/in_process_communicator.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_checker.h"
#include "tests/testing/forwarding_communicator.h"

namespace ember::pipeline {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 3;
constexpr float kLearningRate = 0.05f;

// A chain of elementwise affine chunks y = w * x + b with loss 0.5 * |y|^2
// at the end, trained with SGD on summed micro-batch gradients. Holds every
// chunk's parameters; a rank touches only its own.
class AffineChain final : public ChunkWork {
 public:
  explicit AffineChain(int chunks) : w_(chunks), b_(chunks), dw_(chunks), db_(chunks) {
    for (int c = 0; c < chunks; ++c) {
      for (int i = 0; i < kDim; ++i) {
        w_[c].push_back(0.9f + 0.07f * static_cast<float>(c) - 0.11f * static_cast<float>(i));
        b_[c].push_back(0.01f * static_cast<float>(c * kDim + i) - 0.03f);
      }
      dw_[c].assign(kDim, 0.0f);
      db_[c].assign(kDim, 0.0f);
    }
  }

  static std::vector<float> MicroBatch(int mb) {
    return {0.5f + 0.25f * static_cast<float>(mb), -0.3f * static_cast<float>(mb), 1.0f / (mb + 1)};
  }

  int64_t OutputElements(int, int) const override { return kDim; }

  Status Forward(int mb, int c, const std::vector<float>& input,
                 std::vector<float>* output) override {
    const std::vector<float> x = c == 0 ? MicroBatch(mb) : input;
    if (x.size() != kDim) return Status::InvalidArgument("chunk ", c, ": bad input size");
    output->resize(kDim);
    for (int i = 0; i < kDim; ++i) (*output)[i] = w_[c][i] * x[i] + b_[c][i];
    saved_inputs_[{mb, c}] = x;
    if (c + 1 == static_cast<int>(w_.size())) saved_outputs_[mb] = *output;
    return Status::OK();
  }

  Status Backward(int mb, int c, const std::vector<float>& output_grad,
                  std::vector<float>* input_grad) override {
    const bool last = c + 1 == static_cast<int>(w_.size());
    const std::vector<float> og = last ? saved_outputs_.at(mb) : output_grad;  // dL/dy = y
    const std::vector<float>& x = saved_inputs_.at({mb, c});
    input_grad->resize(kDim);
    for (int i = 0; i < kDim; ++i) {
      dw_[c][i] += og[i] * x[i];
      db_[c][i] += og[i];
      (*input_grad)[i] = og[i] * w_[c][i];
    }
    return Status::OK();
  }

  Status OptimizerStep() override {
    for (size_t c = 0; c < w_.size(); ++c) {
      for (int i = 0; i < kDim; ++i) {
        w_[c][i] -= kLearningRate * dw_[c][i];
        b_[c][i] -= kLearningRate * db_[c][i];
        dw_[c][i] = db_[c][i] = 0;
      }
    }
    saved_inputs_.clear();
    saved_outputs_.clear();
    return Status::OK();
  }

  // Unsplit training step: every micro-batch forward and backward through
  // every chunk, gradients summed in micro-batch order, then the step.
  void SequentialStep(int micro_batches) {
    const int chunks = static_cast<int>(w_.size());
    for (int mb = 0; mb < micro_batches; ++mb) {
      std::vector<float> x, y;
      for (int c = 0; c < chunks; ++c, x = y) CHECK(Forward(mb, c, x, &y).ok());
      std::vector<float> g, gin;
      for (int c = chunks - 1; c >= 0; --c, g = gin) CHECK(Backward(mb, c, g, &gin).ok());
    }
    CHECK(OptimizerStep().ok());
  }

  const std::vector<float>& w(int c) const { return w_[c]; }
  const std::vector<float>& b(int c) const { return b_[c]; }

 private:
  std::vector<std::vector<float>> w_, b_, dw_, db_;
  std::map<std::pair<int, int>, std::vector<float>> saved_inputs_;
  std::map<int, std::vector<float>> saved_outputs_;
};

// Fails the backward of one (micro-batch, chunk).
class FailingChain final : public ChunkWork {
 public:
  FailingChain(int chunks, int fail_mb, int fail_chunk)
      : chain_(chunks), fail_mb_(fail_mb), fail_chunk_(fail_chunk) {}
  int64_t OutputElements(int mb, int c) const override { return chain_.OutputElements(mb, c); }
  Status Forward(int mb, int c, const std::vector<float>& in, std::vector<float>* out) override {
    return chain_.Forward(mb, c, in, out);
  }
  Status Backward(int mb, int c, const std::vector<float>& og, std::vector<float>* ig) override {
    if (mb == fail_mb_ && c == fail_chunk_) return Status::ResourceExhausted("injected fault");
    return chain_.Backward(mb, c, og, ig);
  }
  Status OptimizerStep() override { return chain_.OptimizerStep(); }

 private:
  AffineChain chain_;
  int fail_mb_, fail_chunk_;
};

// Sends that wait for their receive, as NCCL's (over in-process
// communicators): a receiver acknowledges each message, and a Send returns
// with the acknowledgement. A group posts its sends, then its receives, then
// waits for its sends' acknowledgements. `declares` is what
// sends_wait_for_receives() says (false: a backend that hides it).
class RendezvousCommunicator final : public test::ForwardingCommunicator {
 public:
  RendezvousCommunicator(std::unique_ptr<Communicator> inner, bool declares)
      : ForwardingCommunicator(std::move(inner)), declares_(declares) {}
  Status Send(ConstCommBuffer data, int dst, int tag) override {
    EMBER_RETURN_IF_ERROR(inner().Send(data, dst, tag));
    return WaitForAck(dst, tag);
  }
  Status Recv(CommBuffer data, int src, int tag) override {
    EMBER_RETURN_IF_ERROR(inner().Recv(data, src, tag));
    const std::vector<int32_t> ack = {1};
    return inner().Send(ack, src, kAckTag + tag);
  }
  Status SendRecvGroup(const std::vector<PeerTransfer>& transfers) override {
    for (const PeerTransfer& t : transfers) {
      if (t.send) EMBER_RETURN_IF_ERROR(inner().Send(t.data, t.peer, t.tag));
    }
    for (const PeerTransfer& t : transfers) {
      if (!t.send) EMBER_RETURN_IF_ERROR(Recv(t.data, t.peer, t.tag));
    }
    for (const PeerTransfer& t : transfers) {
      if (t.send) EMBER_RETURN_IF_ERROR(WaitForAck(t.peer, t.tag));
    }
    return Status::OK();
  }
  bool sends_wait_for_receives() const override { return declares_; }

 private:
  static constexpr int kAckTag = 1 << 20;
  Status WaitForAck(int peer, int tag) {
    std::vector<int32_t> ack(1);
    return inner().Recv(ack, peer, kAckTag + tag);
  }
  bool declares_;
};

enum class Sends { kBuffered, kRendezvous, kHiddenRendezvous };

// Runs `steps` steps of `schedule` with one thread per rank; returns each
// rank's status of the first failing step (or OK).
std::vector<Status> RunRanks(const Schedule& schedule,
                             std::vector<std::unique_ptr<ChunkWork>>& work, int steps,
                             Sends sends = Sends::kBuffered, double timeout_seconds = 60) {
  const int p = schedule.shape.ranks;
  CommunicatorOptions options;
  options.timeout_seconds = timeout_seconds;  // a hang fails the test instead of stalling it
  auto comms = NewInProcessCommunicators(p, options);
  CHECK(comms.ok()) << comms.status();
  if (sends != Sends::kBuffered) {
    for (auto& comm : *comms) {
      comm = std::make_unique<RendezvousCommunicator>(std::move(comm),
                                                      sends == Sends::kRendezvous);
    }
  }
  std::vector<Status> statuses(static_cast<size_t>(p));
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      for (int s = 0; s < steps && statuses[r].ok(); ++s) {
        statuses[r] = RunRankSchedule(schedule, r, *work[r], (*comms)[r].get());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

TEST(StageExecutorTest, PipelinedTrainingEqualsUnsplitGradientAccumulationBitForBit) {
  for (const auto& [kind, p, v, m] : {std::tuple{"gpipe", 2, 1, 3},
                                      {"gpipe", 3, 2, 2},
                                      {"1f1b", 2, 1, 4},
                                      {"1f1b", 4, 1, 3},
                                      {"1f1b", 3, 1, 1},
                                      {"interleaved", 2, 2, 4},
                                      {"interleaved", 3, 2, 6},
                                      {"interleaved", 2, 3, 2},
                                      {"interleaved", 1, 3, 2},
                                      {"zb-h1", 2, 1, 4},
                                      {"zb-h1", 3, 1, 5}}) {
    Result<Schedule> schedule = BuiltinSchedules().Make(kind, {p, v, m});
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    ASSERT_TRUE(CheckSchedule(*schedule).ok());
    const int chunks = p * v, steps = 2;
    std::vector<std::unique_ptr<ChunkWork>> work;
    for (int r = 0; r < p; ++r) work.push_back(std::make_unique<AffineChain>(chunks));
    for (const Status& status : RunRanks(*schedule, work, steps))
      ASSERT_TRUE(status.ok()) << status;
    AffineChain reference(chunks);
    for (int s = 0; s < steps; ++s) reference.SequentialStep(m);
    for (int c = 0; c < chunks; ++c) {
      const auto& owner = static_cast<const AffineChain&>(*work[schedule->shape.RankOf(c)]);
      EXPECT_EQ(reference.w(c), owner.w(c))
          << kind << " " << ToString(schedule->shape) << " chunk " << c;
      EXPECT_EQ(reference.b(c), owner.b(c))
          << kind << " " << ToString(schedule->shape) << " chunk " << c;
      EXPECT_NE(AffineChain(chunks).w(c), owner.w(c)) << "training moved the weights";
    }
  }
}

TEST(StageExecutorTest, ARankFailingMidScheduleStopsEveryRankWithoutAHang) {
  Result<Schedule> schedule = BuiltinSchedules().Make("interleaved", {2, 2, 4});
  ASSERT_TRUE(schedule.ok());
  std::vector<std::unique_ptr<ChunkWork>> work;
  work.push_back(std::make_unique<AffineChain>(4));
  work.push_back(std::make_unique<FailingChain>(4, /*fail_mb=*/1, /*fail_chunk=*/3));
  const std::vector<Status> statuses = RunRanks(*schedule, work, 1);
  EXPECT_EQ(StatusCode::kResourceExhausted, statuses[1].code());
  EXPECT_THAT(statuses[1].message(), HasSubstr("rank 1 instruction"));
  EXPECT_THAT(statuses[1].message(), HasSubstr("(B1.3): injected fault"));
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_NE(StatusCode::kDeadlineExceeded, statuses[0].code()) << statuses[0];
}

TEST(StageExecutorTest, SendsThatWaitForTheirReceiveFinishTheSchedulesTheCheckerAccepts) {
  for (const auto& [kind, p, v, m] : {std::tuple{"1f1b", 2, 1, 4},
                                      {"1f1b", 3, 1, 5},
                                      {"gpipe", 3, 1, 4},
                                      {"interleaved", 2, 2, 2},
                                      {"interleaved", 3, 2, 3},
                                      {"zb-h1", 3, 1, 5}}) {
    const Schedule schedule = *BuiltinSchedules().Make(kind, {p, v, m});
    ASSERT_TRUE(CheckRendezvous(schedule).ok()) << kind << " " << ToString(schedule.shape);
    std::vector<std::unique_ptr<ChunkWork>> work;
    for (int r = 0; r < p; ++r) work.push_back(std::make_unique<AffineChain>(p * v));
    for (const Status& status : RunRanks(schedule, work, 2, Sends::kRendezvous)) {
      ASSERT_TRUE(status.ok()) << kind << " " << ToString(schedule.shape) << ": " << status;
    }
    AffineChain reference(p * v);
    for (int s = 0; s < 2; ++s) reference.SequentialStep(m);
    for (int c = 0; c < p * v; ++c) {
      const auto& owner = static_cast<const AffineChain&>(*work[schedule.shape.RankOf(c)]);
      EXPECT_EQ(reference.w(c), owner.w(c)) << kind << " " << ToString(schedule.shape);
    }
  }
}

TEST(StageExecutorTest, ARendezvousDeadlockIsRefusedBeforeItHangs) {
  const Schedule schedule = *BuiltinSchedules().Make("interleaved", {2, 2, 4});
  std::vector<std::unique_ptr<ChunkWork>> work;
  for (int r = 0; r < 2; ++r) work.push_back(std::make_unique<AffineChain>(4));
  // A backend that says its sends wait: refused at once, naming the stuck
  // groups.
  for (const Status& status : RunRanks(schedule, work, 1, Sends::kRendezvous)) {
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    EXPECT_THAT(status.message(), HasSubstr("with sends that wait for their receive, deadlock"));
  }
  // One that hides it: the checker was right, the ranks wait for each other
  // until their timeout.
  const std::vector<Status> hidden = RunRanks(schedule, work, 1, Sends::kHiddenRendezvous, 1.0);
  bool timed_out = false;
  for (const Status& status : hidden) {
    EXPECT_FALSE(status.ok());
    timed_out = timed_out || status.code() == StatusCode::kDeadlineExceeded;
  }
  EXPECT_TRUE(timed_out) << hidden[0] << " / " << hidden[1];
}

TEST(StageExecutorTest, RejectsARankOrCommunicatorThatDoesNotFit) {
  Result<Schedule> schedule = BuiltinSchedules().Make("1f1b", {2, 1, 2});
  ASSERT_TRUE(schedule.ok());
  AffineChain work(2);
  EXPECT_EQ(StatusCode::kInvalidArgument, RunRankSchedule(*schedule, 2, work, nullptr).code());
  EXPECT_THAT(RunRankSchedule(*schedule, 0, work, nullptr).message(),
              HasSubstr("needs a communicator of rank 0 in a group of 2"));
}

}  // namespace
}  // namespace ember::pipeline
