// SIGINT and SIGTERM reach training as a flag set by a thread of their own,
// never as a handler run on a working thread (tools/stop_signals.h).
#include "tools/stop_signals.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace ember::tools {
namespace {

bool WaitFor(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return flag.load();
}

TEST(StopSignalsTest, EveryThreadStartedAfterwardsHasTheStopSignalsBlocked) {
  StartStopSignalThread();
  bool int_blocked = false, term_blocked = false;
  std::thread worker([&] {
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    int_blocked = sigismember(&mask, SIGINT) == 1;
    term_blocked = sigismember(&mask, SIGTERM) == 1;
  });
  worker.join();
  EXPECT_TRUE(int_blocked);
  EXPECT_TRUE(term_blocked);
}

TEST(StopSignalsTest, TheFirstSignalSetsTheFlagAndTheProcessGoesOn) {
  StartStopSignalThread();
  for (const int signal : {SIGTERM, SIGINT}) {
    std::atomic<bool> stop{true};
    StopOnSignal scope(&stop);
    EXPECT_FALSE(stop.load()) << "a new scope starts unset";
    EXPECT_EQ(0, scope.signal());
    ASSERT_EQ(0, ::kill(::getpid(), signal));
    ASSERT_TRUE(WaitFor(stop));
    EXPECT_EQ(signal, scope.signal());
  }
}

TEST(StopSignalsDeathTest, ASecondSignalEndsTheProcessAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StartStopSignalThread();
        std::atomic<bool> stop{false};
        StopOnSignal scope(&stop);
        ::kill(::getpid(), SIGTERM);
        if (!WaitFor(stop)) std::_Exit(1);
        // Past the second within which a repeat is the same request.
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        ::kill(::getpid(), SIGTERM);
        ::sleep(10);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

// What coreutils' `timeout` does: the signal to the process and, at once, to
// its process group, so the process gets it twice. That is one request, also
// when the repeat comes after the job has left its StopOnSignal scope.
TEST(StopSignalsDeathTest, ARequestDeliveredTwiceAtOnceIsOneRequest) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const bool scope_ended : {false, true}) {
    SCOPED_TRACE(scope_ended ? "repeat after the scope" : "repeat inside the scope");
    EXPECT_EXIT(
        {
          StartStopSignalThread();
          std::atomic<bool> stop{false};
          {
            StopOnSignal scope(&stop);
            ::kill(::getpid(), SIGINT);
            if (!scope_ended) ::kill(::getpid(), SIGINT);
            if (!WaitFor(stop) || scope.signal() != SIGINT) std::_Exit(1);
          }
          if (scope_ended) ::kill(::getpid(), SIGINT);
          // The repeat is taken by now; alive after it, the process ends as
          // a job would.
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          std::_Exit(3);
        },
        ::testing::ExitedWithCode(3), "");
  }
}

TEST(StopSignalsDeathTest, ASignalOutsideTrainingEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StartStopSignalThread();
        ::kill(::getpid(), SIGINT);
        ::sleep(10);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGINT), "");
}

}  // namespace
}  // namespace ember::tools
