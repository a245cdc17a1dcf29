// The limit of MPI between two ranks of this host, through Ember's MPI
// communicator (core/mpi_communicator.h): a ping-pong's round-trip latency
// (8 bytes) and one-way bandwidth (16 MiB messages), and the time of one
// AllToAllV and one AllReduce of given sizes (a training step's exchanges).
// Run under mpirun with 2 ranks (tools/bench/run_distributed.sh); rank 0
// prints one line of key=value pairs.
//
//   mpirun -np 2 mpi_loopback --exchange_bytes=150000 --allreduce_floats=800000

#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/mpi_communicator.h"
#include "tools/bench/wall_clock.h"

DEFINE_int64(exchange_bytes, 150000, "Bytes each rank sends the other in one AllToAllV.");
DEFINE_int64(allreduce_floats, 800000, "Floats of one AllReduce (the dense gradients).");
DEFINE_int32(repeats, 200, "Repeats of each measurement (the median is reported).");

namespace ember {
namespace {

using bench::Median;
using bench::Now;

int Run() {
  Result<MpiWorld> world = InitMpi(nullptr, nullptr);
  if (!world.ok() || world->size != 2) {
    std::fprintf(stderr, "mpi_loopback: run under mpirun -np 2 (%s)\n",
                 world.ok() ? "wrong size" : world.status().ToString().c_str());
    return 2;
  }
  auto made = NewMpiCommunicator({.timeout_seconds = 60});
  if (!made.ok()) {
    std::fprintf(stderr, "mpi_loopback: %s\n", made.status().ToString().c_str());
    return 1;
  }
  Communicator& comm = **made;
  const int peer = 1 - comm.rank();
  std::vector<double> small(1), big((16 << 20) / sizeof(double));
  std::vector<double> ping, bandwidth, alltoall, allreduce;
  for (int i = 0; i < FLAGS_repeats; ++i) {
    double start = Now();
    if (comm.rank() == 0) {
      if (!comm.Send(small, peer, 1).ok() || !comm.Recv(small, peer, 2).ok()) return 1;
    } else {
      if (!comm.Recv(small, peer, 1).ok() || !comm.Send(small, peer, 2).ok()) return 1;
    }
    ping.push_back(Now() - start);
  }
  for (int i = 0; i < std::max(3, FLAGS_repeats / 20); ++i) {
    const double start = Now();
    if (comm.rank() == 0) {
      if (!comm.Send(big, peer, 3).ok() || !comm.Recv(small, peer, 4).ok()) return 1;
    } else {
      if (!comm.Recv(big, peer, 3).ok() || !comm.Send(small, peer, 4).ok()) return 1;
    }
    bandwidth.push_back(static_cast<double>(big.size() * sizeof(double)) / (Now() - start));
  }
  const int64_t floats = FLAGS_exchange_bytes / 4;
  std::vector<float> out(2 * floats), in(2 * floats);
  for (int i = 0; i < FLAGS_repeats; ++i) {
    const double start = Now();
    if (!comm.AllToAllV(out, {floats, floats}, in, {floats, floats}).ok()) return 1;
    alltoall.push_back(Now() - start);
  }
  std::vector<float> grads(FLAGS_allreduce_floats, 1.0f);
  for (int i = 0; i < FLAGS_repeats; ++i) {
    const double start = Now();
    if (!comm.AllReduce(grads, grads).ok()) return 1;
    allreduce.push_back(Now() - start);
  }
  if (comm.rank() == 0) {
    std::printf("round_trip_us=%.1f bandwidth_gbps=%.2f alltoallv_us=%.1f allreduce_us=%.1f\n",
                Median(ping) * 1e6, Median(bandwidth) * 8 / 1e9, Median(alltoall) * 1e6,
                Median(allreduce) * 1e6);
  }
  made->reset();
  return FinalizeMpi().ok() ? 0 : 1;
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ember::Run();
}
