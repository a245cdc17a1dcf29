// A job that loses a rank: run under mpirun by mpi_rank_loss_test.sh. Every
// rank prints its pid, then all run a sequence of collectives (an all-reduce
// and an all-to-all-v per step, as a training step does); rank
// --victim=R (default 1) kills itself with SIGKILL at step --kill_step
// (default 5). A rank whose collective fails prints the error and exits 1;
// one that finishes every step exits 0, which would make the test fail.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/mpi_communicator.h"

namespace ember {
namespace {

int IntFlag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoi(argv[i] + prefix.size());
    }
  }
  return fallback;
}

int Run(int argc, char** argv) {
  auto world = InitMpi(&argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "InitMpi: %s\n", world.status().ToString().c_str());
    return 2;
  }
  const int victim = IntFlag(argc, argv, "victim", 1);
  const int kill_step = IntFlag(argc, argv, "kill_step", 5);
  const bool stop = IntFlag(argc, argv, "stop", 0) != 0;
  CommunicatorOptions options;
  options.timeout_seconds = IntFlag(argc, argv, "timeout_seconds", 20);
  std::printf("rank %d pid %d\n", world->rank, static_cast<int>(getpid()));
  std::fflush(stdout);
  auto comm = NewMpiCommunicator(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", world->rank, comm.status().ToString().c_str());
    return 1;
  }
  Communicator& c = **comm;
  const int n = c.size();
  for (int step = 0; step < 1000; ++step) {
    if (c.rank() == victim && step == kill_step) kill(getpid(), stop ? SIGSTOP : SIGKILL);
    std::vector<float> grads(1024, 1.0f);
    Status status = c.AllReduce(grads, grads);
    std::vector<uint64_t> keys(n, step), received(n);
    const std::vector<int64_t> ones(n, 1);
    if (status.ok()) status = c.AllToAllV(keys, ones, received, ones);
    if (!status.ok()) {
      std::fprintf(stderr, "rank %d failed at step %d: %s\n", c.rank(), step,
                   status.ToString().c_str());
      return 1;
    }
  }
  comm->reset();
  return FinalizeMpi().ok() ? 0 : 1;
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) { return ember::Run(argc, argv); }
