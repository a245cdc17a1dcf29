#include "core/heartbeat.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"

namespace ember {
namespace {

using ::testing::HasSubstr;

constexpr double kTimeoutSeconds = 0.2;

// What the watchers of a group heard: silences, with the last one's text.
struct Silences {
  std::mutex mu;
  int count = 0;
  std::string last;
  std::function<void(const Status&)> Callback() {
    return [this](const Status& status) {
      std::lock_guard<std::mutex> lock(mu);
      ++count;
      last = status.ToString();
    };
  }
};

std::vector<std::unique_ptr<Communicator>> Group(int size) {
  CommunicatorOptions options;
  options.timeout_seconds = kTimeoutSeconds;
  Result<std::vector<std::unique_ptr<Communicator>>> comms =
      NewInProcessCommunicators(size, options);
  EXPECT_TRUE(comms.ok()) << comms.status();
  return *std::move(comms);
}

void SleepSeconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

TEST(HeartbeatTest, ABeatingRootIsNeverSilentHoweverLongTheOthersWait) {
  std::vector<std::unique_ptr<Communicator>> comms = Group(3);
  Silences silences;
  {
    Heartbeat root(comms[0].get(), 0, kTimeoutSeconds, silences.Callback());
    Heartbeat one(comms[1].get(), 0, kTimeoutSeconds, silences.Callback());
    Heartbeat two(comms[2].get(), 0, kTimeoutSeconds, silences.Callback());
    SleepSeconds(6 * kTimeoutSeconds);
  }
  EXPECT_EQ(silences.count, 0) << silences.last;
}

TEST(HeartbeatTest, ASilentRootIsNamedByEveryWatcherAfterTheTimeout) {
  std::vector<std::unique_ptr<Communicator>> comms = Group(3);
  Silences silences;
  // Rank 0 is there but sends nothing, as a stopped process.
  const auto start = std::chrono::steady_clock::now();
  {
    Heartbeat one(comms[1].get(), 0, kTimeoutSeconds, silences.Callback());
    Heartbeat two(comms[2].get(), 0, kTimeoutSeconds, silences.Callback());
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard<std::mutex> lock(silences.mu);
        if (silences.count == 2) break;
      }
      SleepSeconds(kTimeoutSeconds / 4);
    }
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(silences.count, 2);
  EXPECT_THAT(silences.last, HasSubstr("DeadlineExceeded: heartbeat"));
  EXPECT_THAT(silences.last, HasSubstr("rank 0"));
  EXPECT_GE(waited, kTimeoutSeconds);
  EXPECT_LT(waited, 10 * kTimeoutSeconds);
}

TEST(HeartbeatTest, ARootThatEndsItsHeartbeatIsNotSilence) {
  std::vector<std::unique_ptr<Communicator>> comms = Group(2);
  Silences silences;
  auto watcher = std::make_unique<Heartbeat>(comms[1].get(), 0, kTimeoutSeconds,
                                             silences.Callback());
  {
    Heartbeat root(comms[0].get(), 0, kTimeoutSeconds, silences.Callback());
    SleepSeconds(2 * kTimeoutSeconds);
  }
  // The root is gone; the watcher outlives it by more than the timeout.
  SleepSeconds(3 * kTimeoutSeconds);
  watcher.reset();
  EXPECT_EQ(silences.count, 0) << silences.last;
}

TEST(HeartbeatTest, TheIntervalIsAQuarterOfTheTimeoutAndAtMostFiveSeconds) {
  EXPECT_DOUBLE_EQ(Heartbeat::IntervalSeconds(10), 2.5);
  EXPECT_DOUBLE_EQ(Heartbeat::IntervalSeconds(60), 5);
  EXPECT_DOUBLE_EQ(Heartbeat::IntervalSeconds(3600), 5);
}

}  // namespace
}  // namespace ember
