#pragma once

// The hardware one job may use, as a graph: hosts hold devices (CPU sockets,
// GPUs, disks) and links join devices (PCIe between a socket and its GPUs or
// disks, NVLink between GPUs, the network between the sockets of different
// hosts). Devices carry capacities (cores, memory, free disk space) and the
// rates the cost model needs; on this host those rates are measured by
// calibration (scheduler/calibration.h), for other machines they come from a
// cluster file (scheduler/cluster_file.h).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace ember::scheduler {

enum class DeviceKind { kCpu, kGpu, kDisk };

// The table sizes (rows of dim 16) at which pull and push are calibrated.
inline constexpr double kSmallTableRows = 65536;
inline constexpr double kLargeTableRows = 524288;
// The table sizes (rows of dim 16, an eighth of them in the memory tier) at
// which the disk tier is calibrated.
inline constexpr double kSmallTierRows = 40000;
inline constexpr double kLargeTierRows = 160000;
const char* DeviceKindName(DeviceKind kind);

// Measured or declared speeds of one device. Zero means unknown; the cost
// model then uses its defaults (CostModelOptions). CPU rates are per core
// unless the name says otherwise.
struct DeviceRates {
  // Dense math: SGEMM rate on one core, and on every core of the device
  // (CPU); the whole device (GPU).
  double gemm_gflops_per_core = 0.0;
  double gemm_gflops = 0.0;
  // Streaming memory bandwidth, GB/s (all cores / the whole GPU).
  double memory_gbps = 0.0;
  // Reading a batch out of an in-memory dataset (a gather of its examples),
  // per id of the batch, on one core.
  double read_ns_per_id = 0.0;
  // Embedding work on one core, per key: hashing a batch's keys into unique
  // ones, reading a row (pull) and updating one (push, with the optimizer);
  // nanoseconds at dim 16 plus nanoseconds per extra float of the row.
  double unique_ns_per_key = 0.0;
  // Sorting a batch's distinct keys (pipelined training only: the
  // staleness gate merges sorted key lists), per key and per log2 of their
  // number (n log2 n), nanoseconds on one core.
  double sort_ns_per_key_log2 = 0.0;
  double pull_ns_per_row = 0.0;
  double pull_ns_per_float = 0.0;
  double push_ns_per_row = 0.0;
  double push_ns_per_float = 0.0;
  // The per-row pull and push costs above are measured on a table of
  // kSmallTableRows rows (caches help); these on one of kLargeTableRows.
  double pull_ns_per_row_large = 0.0;
  double push_ns_per_row_large = 0.0;
  // A row pulled for the first time: created (index insert, the arena
  // grown and its pages first touched, initial values), per row of dim 16,
  // on a table growing to kSmallTableRows and to kLargeTableRows rows. 0:
  // not measured (then a push's cost stands in for it).
  double create_ns_per_row = 0.0;
  double create_ns_per_row_large = 0.0;
  // Bytes one row of the memory tier takes beyond its floats (index,
  // metadata), measured on a table.
  double row_overhead_bytes = 0.0;
  // Disks: random 4 KiB reads per second and sequential GB/s.
  double random_reads_per_sec = 0.0;
  double read_gbps = 0.0;
  // Disks: the embedding table's disk tier, per row missing from the memory
  // tier, called from one thread: its pull (read, decode, insert, evict and
  // write back another) and its push (update, spill), microseconds of CPU
  // (the tier's background flushes and compactions included), on a table of
  // kSmallTierRows rows.
  double tier_pull_us_per_miss = 0.0;
  double tier_push_us_per_miss = 0.0;
  // Disks: a row created while the memory tier is full (looked up on disk,
  // made in memory, and another evicted and written to the disk tier),
  // microseconds of CPU as above.
  double tier_create_us_per_row = 0.0;
  // The same three on a table of kLargeTierRows rows (a miss costs more in
  // a larger tier: fewer of its index, filter and data blocks are cached).
  double tier_pull_us_per_miss_large = 0.0;
  double tier_push_us_per_miss_large = 0.0;
  double tier_create_us_per_row_large = 0.0;
};

struct DeviceNode {
  // "host/cpu0", "host/gpu3", "host/disk0": unique in the graph.
  std::string id;
  DeviceKind kind = DeviceKind::kCpu;
  int host = 0;   // Index into ResourceGraph::hosts.
  int index = 0;  // Among the devices of its kind on its host.
  // CPU: hardware threads; GPU: streaming multiprocessors (informative).
  int cores = 0;
  // CPU: DRAM; GPU: device memory; disk: free space.
  int64_t memory_bytes = 0;
  std::string model;  // CPU model, GPU name or disk path.
  DeviceRates rates;
};

enum class LinkKind { kPcie, kNvlink, kNetwork };
const char* LinkKindName(LinkKind kind);

// A link between two devices, usable both ways at `gbps` each way.
struct Link {
  int a = 0;  // Indices into ResourceGraph::devices.
  int b = 0;
  LinkKind kind = LinkKind::kPcie;
  double gbps = 0.0;  // GB/s.
  double latency_us = 0.0;
};

struct Host {
  std::string name;
  std::vector<int> devices;  // Indices into ResourceGraph::devices.
};

struct ResourceGraph {
  std::vector<Host> hosts;
  std::vector<DeviceNode> devices;
  std::vector<Link> links;

  // Adds a device to host `host` (its index among its kind is set) and
  // returns its index.
  int AddDevice(int host, DeviceKind kind, DeviceNode node);
  void AddLink(int a, int b, LinkKind kind, double gbps, double latency_us);
  // Devices of `kind` (on `host`, or on every host when host < 0).
  std::vector<int> DevicesOf(DeviceKind kind, int host = -1) const;
  // The fastest direct link between devices a and b, or nullptr.
  const Link* LinkBetween(int a, int b) const;
  // The bandwidth (GB/s) and latency (us) of the best path from a to b
  // through at most one intermediate device (e.g. GPU -> CPU -> network ->
  // CPU); the path's bandwidth is its slowest hop, its latency the sum.
  // {0, 0} when a == b; {-1, -1} when not connected.
  std::pair<double, double> PathBetween(int a, int b) const;

  // Hardware threads of the first host's CPUs (the local host when discovered).
  int cpu_threads() const;
  // DRAM of the first host.
  int64_t memory_bytes() const;
  // GPUs of the first host.
  std::vector<Device> cuda_devices() const;
  const std::string& host_name() const;
  // A line per host: "host x: 2 threads (1 socket, Xeon ...), 23.4 GiB,
  // 0 GPUs, disk 120 GiB free".
  std::string Summary() const;
};

// `devices` ordered into a ring: from the first, each next one is the
// unplaced device with the fastest path from the current one (ties: the
// lowest index).
std::vector<int> GreedyRingOrder(const ResourceGraph& graph, const std::vector<int>& devices);
// The slowest hop and the largest latency of the ring `order` (closing back
// to the first).
std::pair<double, double> RingBottleneck(const ResourceGraph& graph, const std::vector<int>& order);

// What discovery reads from a machine, kept apart from the reading so that
// tests can describe a machine that is not there.
struct SystemSnapshot {
  std::string host_name;
  std::string cpuinfo;  // The text of /proc/cpuinfo.
  std::string meminfo;  // The text of /proc/meminfo.
  // Free bytes of the file system that holds `disk_path`; < 0: unknown.
  std::string disk_path;
  int64_t disk_free_bytes = -1;
  struct Gpu {
    std::string name;
    int64_t memory_bytes = 0;
  };
  std::vector<Gpu> gpus;
};

// Reads this machine's snapshot (the free space of `disk_path`, e.g. the
// temporary directory the disk tier will use). Never fails: what cannot be
// read is left empty.
SystemSnapshot ReadSystemSnapshot(const std::string& disk_path);

// The resource graph of one host from its snapshot: a CPU device per socket
// ("physical id" in cpuinfo; one when absent) with its hardware threads and
// an equal share of MemTotal, a GPU device per GPU joined to socket 0 by
// PCIe, a disk joined to socket 0. Rates are left unknown (calibration
// fills them).
ResourceGraph DescribeHost(const SystemSnapshot& snapshot);

// DescribeHost(ReadSystemSnapshot(temporary directory)).
ResourceGraph DiscoverLocalHost();

}  // namespace ember::scheduler
