#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "core/in_process_communicator.h"

namespace ember::test {

// Runs body(r, comm) for every rank r of a new in-process group of `ranks`
// (core/in_process_communicator.h), each on a thread of its own, and joins
// them: what the ranks of a job do together, in one test process.
inline void OnInProcessRanks(int ranks, const std::function<void(int, Communicator&)>& body,
                             double timeout_seconds = 30) {
  auto comms = NewInProcessCommunicators(ranks, {.timeout_seconds = timeout_seconds});
  ASSERT_TRUE(comms.ok()) << comms.status();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { body(r, *(*comms)[r]); });
  for (std::thread& t : threads) t.join();
}

}  // namespace ember::test
