#include "scheduler/resource_graph.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "core/device.h"
#include "core/threads.h"

namespace ember::scheduler {
namespace {

// Default link speeds for a discovered host until calibration measures them:
// PCIe 3.0 x16 in practice, and an NVMe SSD.
constexpr double kPcieGbps = 12.0;
constexpr double kPcieLatencyUs = 10.0;
constexpr double kDiskGbps = 2.0;
constexpr double kDiskLatencyUs = 80.0;

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "key\t: value" lines of /proc/cpuinfo and /proc/meminfo.
std::pair<std::string, std::string> SplitField(const std::string& line) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return {"", ""};
  auto trim = [](std::string s) {
    const size_t begin = s.find_first_not_of(" \t");
    const size_t end = s.find_last_not_of(" \t");
    return begin == std::string::npos ? std::string() : s.substr(begin, end - begin + 1);
  };
  return {trim(line.substr(0, colon)), trim(line.substr(colon + 1))};
}

}  // namespace

const char* DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kGpu:
      return "gpu";
    case DeviceKind::kDisk:
      return "disk";
  }
  return "?";
}

const char* LinkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kPcie:
      return "pcie";
    case LinkKind::kNvlink:
      return "nvlink";
    case LinkKind::kNetwork:
      return "network";
  }
  return "?";
}

int ResourceGraph::AddDevice(int host, DeviceKind kind, DeviceNode node) {
  node.kind = kind;
  node.host = host;
  node.index = static_cast<int>(DevicesOf(kind, host).size());
  if (node.id.empty()) {
    node.id = hosts[host].name + "/" + DeviceKindName(kind) + std::to_string(node.index);
  }
  devices.push_back(std::move(node));
  const int id = static_cast<int>(devices.size()) - 1;
  hosts[host].devices.push_back(id);
  return id;
}

void ResourceGraph::AddLink(int a, int b, LinkKind kind, double gbps, double latency_us) {
  links.push_back(Link{a, b, kind, gbps, latency_us});
}

std::vector<int> ResourceGraph::DevicesOf(DeviceKind kind, int host) const {
  std::vector<int> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].kind == kind && (host < 0 || devices[i].host == host)) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

const Link* ResourceGraph::LinkBetween(int a, int b) const {
  const Link* best = nullptr;
  for (const Link& link : links) {
    if ((link.a == a && link.b == b) || (link.a == b && link.b == a)) {
      if (best == nullptr || link.gbps > best->gbps) best = &link;
    }
  }
  return best;
}

std::pair<double, double> ResourceGraph::PathBetween(int a, int b) const {
  if (a == b) return {0.0, 0.0};
  std::pair<double, double> best{-1.0, -1.0};
  auto consider = [&best](double gbps, double latency_us) {
    if (gbps > best.first || (gbps == best.first && latency_us < best.second)) {
      best = {gbps, latency_us};
    }
  };
  if (const Link* direct = LinkBetween(a, b)) consider(direct->gbps, direct->latency_us);
  for (size_t m = 0; m < devices.size(); ++m) {
    const Link* first = LinkBetween(a, static_cast<int>(m));
    const Link* second = first ? LinkBetween(static_cast<int>(m), b) : nullptr;
    if (first && second) {
      consider(std::min(first->gbps, second->gbps), first->latency_us + second->latency_us);
    }
  }
  // Between devices of different hosts: device -> its socket -> the host's
  // networked socket -> network -> the same on the other side.
  if (best.first < 0 && devices[a].host != devices[b].host) {
    // The socket a device hangs off (itself for a socket), and a socket of
    // its host with a network link to `other_host`.
    auto attach = [&](int d) {
      if (devices[d].kind == DeviceKind::kCpu) return d;
      for (int c : DevicesOf(DeviceKind::kCpu, devices[d].host)) {
        if (LinkBetween(d, c)) return c;
      }
      return -1;
    };
    auto networked = [&](int host, int other_host) {
      for (int c : DevicesOf(DeviceKind::kCpu, host)) {
        for (int o : DevicesOf(DeviceKind::kCpu, other_host)) {
          if (LinkBetween(c, o)) return std::make_pair(c, o);
        }
      }
      return std::make_pair(-1, -1);
    };
    const auto [na, nb] = networked(devices[a].host, devices[b].host);
    const std::vector<int> hops = {a, attach(a), na, nb, attach(b), b};
    double gbps = 1e300, latency = 0.0;
    bool connected = na >= 0 && hops[1] >= 0 && hops[4] >= 0;
    for (size_t h = 0; connected && h + 1 < hops.size(); ++h) {
      if (hops[h] == hops[h + 1]) continue;
      const Link* link = LinkBetween(hops[h], hops[h + 1]);
      if (!link) {
        connected = false;
        break;
      }
      gbps = std::min(gbps, link->gbps);
      latency += link->latency_us;
    }
    if (connected) consider(gbps, latency);
  }
  return best;
}

int ResourceGraph::cpu_threads() const {
  int threads = 0;
  for (int d : DevicesOf(DeviceKind::kCpu, 0)) threads += devices[d].cores;
  return std::max(1, threads);
}

int64_t ResourceGraph::memory_bytes() const {
  int64_t bytes = 0;
  for (int d : DevicesOf(DeviceKind::kCpu, 0)) bytes += devices[d].memory_bytes;
  return bytes;
}

std::vector<Device> ResourceGraph::cuda_devices() const {
  std::vector<Device> out;
  for (int d : DevicesOf(DeviceKind::kGpu, 0)) out.push_back(Device::Cuda(devices[d].index));
  return out;
}

const std::string& ResourceGraph::host_name() const {
  static const std::string kNone = "(no host)";
  return hosts.empty() ? kNone : hosts[0].name;
}

std::string ResourceGraph::Summary() const {
  std::string out;
  for (size_t h = 0; h < hosts.size(); ++h) {
    int threads = 0, sockets = 0;
    int64_t dram = 0, gpu_memory = 0, disk = 0;
    std::string cpu_model;
    const std::vector<int> gpus = DevicesOf(DeviceKind::kGpu, static_cast<int>(h));
    for (int d : hosts[h].devices) {
      const DeviceNode& node = devices[d];
      if (node.kind == DeviceKind::kCpu) {
        threads += node.cores, dram += node.memory_bytes, ++sockets;
        cpu_model = node.model;
      } else if (node.kind == DeviceKind::kGpu) {
        gpu_memory += node.memory_bytes;
      } else {
        disk += node.memory_bytes;
      }
    }
    char line[512];
    std::snprintf(line, sizeof(line),
                  "%shost %s: %d CPU threads (%d socket%s%s%s), %.1f GiB memory, %zu GPU(s)"
                  " with %.1f GiB, disk %.1f GiB free",
                  h ? "\n" : "", hosts[h].name.c_str(), threads, sockets, sockets == 1 ? "" : "s",
                  cpu_model.empty() ? "" : ", ", cpu_model.c_str(), dram / 1073741824.0,
                  gpus.size(), gpu_memory / 1073741824.0, disk / 1073741824.0);
    out += line;
  }
  return out;
}

std::vector<int> GreedyRingOrder(const ResourceGraph& graph, const std::vector<int>& devices) {
  std::vector<int> order;
  if (devices.empty()) return order;
  std::vector<bool> used(devices.size(), false);
  order.push_back(devices[0]);
  used[0] = true;
  for (size_t step = 1; step < devices.size(); ++step) {
    int best = -1;
    double best_gbps = -2.0, best_latency = 0.0;
    for (size_t i = 0; i < devices.size(); ++i) {
      if (used[i]) continue;
      const auto [gbps, latency] = graph.PathBetween(order.back(), devices[i]);
      if (gbps > best_gbps || (gbps == best_gbps && latency < best_latency)) {
        best = static_cast<int>(i);
        best_gbps = gbps;
        best_latency = latency;
      }
    }
    used[best] = true;
    order.push_back(devices[best]);
  }
  return order;
}

std::pair<double, double> RingBottleneck(const ResourceGraph& graph,
                                         const std::vector<int>& order) {
  if (order.size() < 2) return {0.0, 0.0};
  double gbps = std::numeric_limits<double>::infinity(), latency = 0.0;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto [g, l] = graph.PathBetween(order[i], order[(i + 1) % order.size()]);
    gbps = std::min(gbps, g);
    latency = std::max(latency, l);
  }
  return {gbps, latency};
}

SystemSnapshot ReadSystemSnapshot(const std::string& disk_path) {
  SystemSnapshot snapshot;
  char name[256] = {0};
  snapshot.host_name = ::gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  snapshot.cpuinfo = ReadWholeFile("/proc/cpuinfo");
  snapshot.meminfo = ReadWholeFile("/proc/meminfo");
  snapshot.disk_path = disk_path;
  struct statvfs fs;
  if (::statvfs(disk_path.c_str(), &fs) == 0) {
    snapshot.disk_free_bytes = static_cast<int64_t>(fs.f_bavail) * fs.f_frsize;
  }
  // Names and memory of GPUs need the CUDA runtime; the cost model only
  // needs their count here, and a cluster file describes them fully.
  for (int i = 0; i < CudaDeviceCount(); ++i)
    snapshot.gpus.push_back({"cuda:" + std::to_string(i), 0});
  return snapshot;
}

ResourceGraph DescribeHost(const SystemSnapshot& snapshot) {
  ResourceGraph graph;
  graph.hosts.push_back(Host{snapshot.host_name.empty() ? "localhost" : snapshot.host_name, {}});
  // Threads per socket and the CPU model from cpuinfo's processor blocks.
  std::map<int, int> threads_per_socket;
  std::string model;
  int socket = 0;
  bool in_processor = false;
  std::istringstream cpuinfo(snapshot.cpuinfo);
  auto end_processor = [&] {
    if (in_processor) ++threads_per_socket[socket];
    in_processor = false;
    socket = 0;
  };
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto [key, value] = SplitField(line);
    if (key == "processor") {
      end_processor();
      in_processor = true;
    } else if (key == "physical id") {
      socket = std::atoi(value.c_str());
    } else if (key == "model name" && model.empty()) {
      model = value;
    }
  }
  end_processor();
  if (threads_per_socket.empty()) threads_per_socket[0] = std::max(1, HardwareThreads());
  int64_t mem_total = 0;
  std::istringstream meminfo(snapshot.meminfo);
  for (std::string line; std::getline(meminfo, line);) {
    const auto [key, value] = SplitField(line);
    if (key == "MemTotal") mem_total = std::atoll(value.c_str()) * 1024;  // "N kB"
  }
  const int sockets = static_cast<int>(threads_per_socket.size());
  int cpu0 = -1;
  for (const auto& [id, threads] : threads_per_socket) {
    DeviceNode cpu;
    cpu.cores = threads;
    cpu.memory_bytes = mem_total / sockets;
    cpu.model = model;
    const int d = graph.AddDevice(0, DeviceKind::kCpu, cpu);
    if (cpu0 < 0) cpu0 = d;
  }
  for (const SystemSnapshot::Gpu& gpu : snapshot.gpus) {
    DeviceNode node;
    node.memory_bytes = gpu.memory_bytes;
    node.model = gpu.name;
    const int d = graph.AddDevice(0, DeviceKind::kGpu, node);
    graph.AddLink(cpu0, d, LinkKind::kPcie, kPcieGbps, kPcieLatencyUs);
  }
  if (snapshot.disk_free_bytes >= 0) {
    DeviceNode disk;
    disk.memory_bytes = snapshot.disk_free_bytes;
    disk.model = snapshot.disk_path;
    const int d = graph.AddDevice(0, DeviceKind::kDisk, disk);
    graph.AddLink(cpu0, d, LinkKind::kPcie, kDiskGbps, kDiskLatencyUs);
  }
  return graph;
}

ResourceGraph DiscoverLocalHost() {
  return DescribeHost(ReadSystemSnapshot(std::filesystem::temp_directory_path().string()));
}

}  // namespace ember::scheduler
