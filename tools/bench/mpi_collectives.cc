// Ember's MPI all-reduce (core/mpi_communicator.h: a reduce-scatter in rank
// order, then an all-gather) against MPI's own MPI_Allreduce on the same
// buffers, in the same run, for N ranks of this host: bytes each rank sent
// (the communicator's counters) against the bandwidth bound 2 (N-1)/N x size
// and against the (N-1) x size of sending the whole buffer to every peer
// (Ember's all-reduce before issue 62); the median time of each; and whether
// each gives the same bits on every rank and the rank-ordered sum.
// Run under mpirun (tools/bench/run_collectives.sh); rank 0 prints one line
// per size.
//
//   mpirun -np 4 mpi_collectives --floats=65536,1048576,8388608

#include <gflags/gflags.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/mpi_communicator.h"
#include "tools/bench/wall_clock.h"

DEFINE_string(floats, "65536,1048576,8388608",
              "Comma-separated sizes (f32 elements) of the all-reduces to measure.");
DEFINE_int32(repeats, 30, "Repeats of each measurement (the median is reported).");

namespace ember {
namespace {

using bench::Median;
using bench::Now;

// Values whose float sums depend on the order of addition.
float Value(int rank, int64_t i) {
  uint64_t h = (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^
               (static_cast<uint64_t>(i) + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  const float mantissa = 1.0f + static_cast<float>(h & 0xFFFF) / 65536.0f;
  const int exponent = static_cast<int>((h >> 24) % 32) - 16;
  return ((h >> 40) & 1 ? -1.0f : 1.0f) * std::ldexp(mantissa, exponent);
}

uint64_t HashBits(const std::vector<float>& values) {
  uint64_t h = 1469598103934665603ull;
  for (float v : values) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof(bits));
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

struct Agreement {
  bool same_on_every_rank = true;
  bool rank_ordered = true;
};

// Whether `result` has the same bits on every rank, and those of the
// sequential rank-ordered sum.
Result<Agreement> Check(Communicator& comm, const std::vector<float>& result) {
  std::vector<float> expected(result.size());
  for (size_t i = 0; i < result.size(); ++i) {
    float sum = Value(0, static_cast<int64_t>(i));
    for (int r = 1; r < comm.size(); ++r) sum += Value(r, static_cast<int64_t>(i));
    expected[i] = sum;
  }
  std::vector<uint64_t> mine = {HashBits(result), HashBits(result) == HashBits(expected) ? 1u : 0u};
  std::vector<uint64_t> all(2 * comm.size());
  EMBER_RETURN_IF_ERROR(comm.AllGather(mine, all));
  Agreement a;
  for (int r = 0; r < comm.size(); ++r) {
    a.same_on_every_rank = a.same_on_every_rank && all[2 * r] == all[0];
    a.rank_ordered = a.rank_ordered && all[2 * r + 1] == 1;
  }
  return a;
}

Status Measure(Communicator& comm, int64_t floats) {
  const int n = comm.size();
  std::vector<float> in(floats), out(floats);
  for (int64_t i = 0; i < floats; ++i) in[i] = Value(comm.rank(), i);
  std::vector<double> ours, theirs;
  int64_t bytes = 0;
  for (int i = 0; i < FLAGS_repeats; ++i) {
    const CommCounters before = comm.counters().value_or(CommCounters{});
    double start = Now();
    EMBER_RETURN_IF_ERROR(comm.AllReduce(in, out));
    ours.push_back(Now() - start);
    bytes = comm.counters().value_or(CommCounters{}).bytes_sent - before.bytes_sent;
    MPI_Barrier(MPI_COMM_WORLD);
    start = Now();
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    theirs.push_back(Now() - start);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  EMBER_ASSIGN_OR_RETURN(const Agreement mpi, Check(comm, out));
  EMBER_RETURN_IF_ERROR(comm.AllReduce(in, out));
  EMBER_ASSIGN_OR_RETURN(const Agreement ember, Check(comm, out));
  // The slowest rank's bytes: every rank sends the same but for block sizes.
  std::vector<int64_t> most = {bytes};
  std::vector<int64_t> all(n);
  EMBER_RETURN_IF_ERROR(comm.AllGather(most, all));
  bytes = *std::max_element(all.begin(), all.end());
  const double size = static_cast<double>(floats) * sizeof(float);
  if (comm.rank() == 0) {
    const double bound = 2.0 * (n - 1) / n * size;
    std::printf(
        "ranks=%d floats=%lld bytes_sent_per_rank=%lld bound_2(N-1)/N=%.0f ratio_to_bound=%.4f "
        "whole_buffer_to_every_peer=%.0f ember_us=%.1f mpi_allreduce_us=%.1f ember/mpi=%.3f "
        "ember_same_bits_every_rank=%d ember_rank_ordered=%d mpi_same_bits_every_rank=%d "
        "mpi_rank_ordered=%d\n",
        n, static_cast<long long>(floats), static_cast<long long>(bytes), bound,
        bound > 0 ? bytes / bound : 0.0, (n - 1) * size, Median(ours) * 1e6,
        Median(theirs) * 1e6, Median(ours) / Median(theirs), ember.same_on_every_rank,
        ember.rank_ordered, mpi.same_on_every_rank, mpi.rank_ordered);
    std::fflush(stdout);
  }
  return Status::OK();
}

int Run() {
  Result<MpiWorld> world = InitMpi(nullptr, nullptr);
  if (!world.ok()) {
    std::fprintf(stderr, "mpi_collectives: %s\n", world.status().ToString().c_str());
    return 2;
  }
  auto made = NewMpiCommunicator({.timeout_seconds = 120});
  if (!made.ok()) {
    std::fprintf(stderr, "mpi_collectives: %s\n", made.status().ToString().c_str());
    return 1;
  }
  std::stringstream sizes(FLAGS_floats);
  for (std::string item; std::getline(sizes, item, ',');) {
    const int64_t floats = std::stoll(item);
    if (Status status = Measure(**made, floats); !status.ok()) {
      std::fprintf(stderr, "mpi_collectives: %s\n", status.ToString().c_str());
      return 1;
    }
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
