#include "scheduler/cluster_file.h"

#include <string>
#include <utility>
#include <vector>

#include "core/file.h"
#include "core/status.h"

namespace ember::scheduler {
namespace {

// The fields of DeviceRates by name.
const std::vector<std::pair<const char*, double DeviceRates::*>>& RateFields() {
  static const std::vector<std::pair<const char*, double DeviceRates::*>> kFields = {
      {"gemm_gflops_per_core", &DeviceRates::gemm_gflops_per_core},
      {"gemm_gflops", &DeviceRates::gemm_gflops},
      {"memory_gbps", &DeviceRates::memory_gbps},
      {"read_ns_per_id", &DeviceRates::read_ns_per_id},
      {"unique_ns_per_key", &DeviceRates::unique_ns_per_key},
      {"sort_ns_per_key_log2", &DeviceRates::sort_ns_per_key_log2},
      {"pull_ns_per_row", &DeviceRates::pull_ns_per_row},
      {"pull_ns_per_float", &DeviceRates::pull_ns_per_float},
      {"push_ns_per_row", &DeviceRates::push_ns_per_row},
      {"push_ns_per_float", &DeviceRates::push_ns_per_float},
      {"pull_ns_per_row_large", &DeviceRates::pull_ns_per_row_large},
      {"push_ns_per_row_large", &DeviceRates::push_ns_per_row_large},
      {"create_ns_per_row", &DeviceRates::create_ns_per_row},
      {"create_ns_per_row_large", &DeviceRates::create_ns_per_row_large},
      {"row_overhead_bytes", &DeviceRates::row_overhead_bytes},
      {"random_reads_per_sec", &DeviceRates::random_reads_per_sec},
      {"read_gbps", &DeviceRates::read_gbps},
      {"tier_pull_us_per_miss", &DeviceRates::tier_pull_us_per_miss},
      {"tier_push_us_per_miss", &DeviceRates::tier_push_us_per_miss},
      {"tier_create_us_per_row", &DeviceRates::tier_create_us_per_row},
      {"tier_pull_us_per_miss_large", &DeviceRates::tier_pull_us_per_miss_large},
      {"tier_push_us_per_miss_large", &DeviceRates::tier_push_us_per_miss_large},
      {"tier_create_us_per_row_large", &DeviceRates::tier_create_us_per_row_large},
  };
  return kFields;
}

constexpr double kGiB = 1073741824.0;

// The field `key` of `f` into `*out` when present: a number >= 0.
void OptionalNonNegative(JsonFields& f, const char* key, double* out) {
  f.Optional(key, out);
  if (!(*out >= 0)) {
    throw JsonFieldError(key, internal::StrCat("is ", *out, "; expected a number >= 0"));
  }
}

// The field `key` of `f` into `*out` when present: an integer in [lo, 1e6].
void OptionalCount(JsonFields& f, const char* key, int lo, int* out) {
  f.Optional(key, out);
  if (*out < lo || *out > 1000000) {
    throw JsonFieldError(key,
                         internal::StrCat("is ", *out, "; expected an integer in [", lo, ", 1e6]"));
  }
}

// A socket, GPU or disk of a host, `count` times.
struct DeviceSpec {
  DeviceNode node;
  int count = 1;
  double pcie_gbps = 12.0, pcie_latency_us = 10.0;
};

// The fields every kind of device has; its memory (or free space) in GiB
// under `memory_key`.
void ReadDeviceFields(JsonFields& f, const char* memory_key, DeviceSpec& d) {
  double memory_gb = 0.0;
  OptionalNonNegative(f, memory_key, &memory_gb);
  d.node.memory_bytes = static_cast<int64_t>(memory_gb * kGiB);
  OptionalCount(f, "count", 1, &d.count);
  f.Optional("name", &d.node.model);
  f.Optional("rates", &d.node.rates);
}

struct SocketSpec : DeviceSpec {};
struct GpuSpec : DeviceSpec {};
struct DiskSpec : DeviceSpec {};

void from_json(const Json& j, SocketSpec& d) {
  JsonFields f(j);
  ReadDeviceFields(f, "memory_gb", d);
  OptionalCount(f, "cores", 0, &d.node.cores);
  if (d.node.cores < 1) throw JsonFieldError("cores", "is missing or 0; a socket needs a core");
  f.Done();
}

void from_json(const Json& j, GpuSpec& d) {
  JsonFields f(j);
  ReadDeviceFields(f, "memory_gb", d);
  OptionalCount(f, "cores", 0, &d.node.cores);
  OptionalNonNegative(f, "pcie_gbps", &d.pcie_gbps);
  OptionalNonNegative(f, "pcie_latency_us", &d.pcie_latency_us);
  f.Done();
}

void from_json(const Json& j, DiskSpec& d) {
  JsonFields f(j);
  ReadDeviceFields(f, "free_gb", d);
  f.Done();
}

struct HostSpec {
  std::string name = "host";
  int count = 1;
  std::vector<SocketSpec> sockets;
  std::vector<GpuSpec> gpus;
  std::vector<DiskSpec> disks;
  double nvlink_gbps = 0.0, nvlink_latency_us = 0.0;
};

void from_json(const Json& j, HostSpec& host) {
  JsonFields f(j);
  f.Optional("name", &host.name);
  if (host.name.empty()) throw JsonFieldError("name", "is empty");
  OptionalCount(f, "count", 1, &host.count);
  f.Optional("sockets", &host.sockets);
  if (host.sockets.empty()) throw JsonFieldError("sockets", "lists none; a host needs a socket");
  f.Optional("gpus", &host.gpus);
  f.Optional("disks", &host.disks);
  OptionalNonNegative(f, "nvlink_gbps", &host.nvlink_gbps);
  OptionalNonNegative(f, "nvlink_latency_us", &host.nvlink_latency_us);
  f.Done();
}

// Between every two hosts.
struct NetworkSpec {
  double gbps = 12.5, latency_us = 10.0;
};

void from_json(const Json& j, NetworkSpec& network) {
  JsonFields f(j);
  OptionalNonNegative(f, "gbps", &network.gbps);
  if (network.gbps <= 0) throw JsonFieldError("gbps", "is 0; expected a number > 0");
  OptionalNonNegative(f, "latency_us", &network.latency_us);
  f.Done();
}

struct ClusterSpec {
  std::vector<HostSpec> hosts;
  NetworkSpec network;
};

void from_json(const Json& j, ClusterSpec& cluster) {
  JsonFields f(j);
  f.Optional("hosts", &cluster.hosts);
  if (cluster.hosts.empty()) {
    throw JsonFieldError("hosts", "lists none; expected at least one host");
  }
  f.Optional("network", &cluster.network);
  f.Done();
}

// The devices of `spec` in `graph` as host `host`, named `name`; returns
// its first CPU.
int AddHost(const HostSpec& spec, const std::string& name, ResourceGraph& graph) {
  const int host = static_cast<int>(graph.hosts.size());
  graph.hosts.push_back(Host{name, {}});
  std::vector<int> cpus, gpus;
  for (const SocketSpec& s : spec.sockets) {
    for (int c = 0; c < s.count; ++c) {
      cpus.push_back(graph.AddDevice(host, DeviceKind::kCpu, s.node));
    }
  }
  for (const GpuSpec& g : spec.gpus) {
    for (int c = 0; c < g.count; ++c) {
      const int d = graph.AddDevice(host, DeviceKind::kGpu, g.node);
      // GPUs hang off the sockets in turn.
      graph.AddLink(cpus[gpus.size() % cpus.size()], d, LinkKind::kPcie, g.pcie_gbps,
                    g.pcie_latency_us);
      gpus.push_back(d);
    }
  }
  for (const DiskSpec& disk : spec.disks) {
    for (int c = 0; c < disk.count; ++c) {
      const int d = graph.AddDevice(host, DeviceKind::kDisk, disk.node);
      graph.AddLink(cpus[0], d, LinkKind::kPcie,
                    disk.node.rates.read_gbps > 0 ? disk.node.rates.read_gbps : 2.0, 80.0);
    }
  }
  if (spec.nvlink_gbps > 0) {
    for (size_t a = 0; a < gpus.size(); ++a) {
      for (size_t b = a + 1; b < gpus.size(); ++b) {
        graph.AddLink(gpus[a], gpus[b], LinkKind::kNvlink, spec.nvlink_gbps,
                      spec.nvlink_latency_us);
      }
    }
  }
  // Sockets of a host talk over the inter-socket link: as fast as memory.
  for (size_t a = 1; a < cpus.size(); ++a) {
    graph.AddLink(cpus[0], cpus[a], LinkKind::kPcie, 40.0, 1.0);
  }
  return cpus[0];
}

}  // namespace

void to_json(Json& j, const DeviceRates& rates) {
  j = Json::object();
  for (const auto& [name, field] : RateFields()) {
    if (rates.*field > 0) j[name] = rates.*field;
  }
}

void from_json(const Json& j, DeviceRates& rates) {
  JsonFields f(j);
  for (const auto& [name, field] : RateFields()) OptionalNonNegative(f, name, &(rates.*field));
  f.Done();
}

Result<ResourceGraph> ParseClusterFile(const std::string& text, const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const ClusterSpec cluster, FromJsonText<ClusterSpec>(text, path));
  ResourceGraph graph;
  std::vector<int> first_cpu;
  for (const HostSpec& spec : cluster.hosts) {
    for (int c = 0; c < spec.count; ++c) {
      first_cpu.push_back(
          AddHost(spec, spec.count == 1 ? spec.name : spec.name + std::to_string(c), graph));
    }
  }
  for (size_t a = 0; a < first_cpu.size(); ++a) {
    for (size_t b = a + 1; b < first_cpu.size(); ++b) {
      graph.AddLink(first_cpu[a], first_cpu[b], LinkKind::kNetwork, cluster.network.gbps,
                    cluster.network.latency_us);
    }
  }
  return graph;
}

Result<ResourceGraph> ReadClusterFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseClusterFile(text, path);
}

}  // namespace ember::scheduler
