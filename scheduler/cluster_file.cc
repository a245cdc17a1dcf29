#include "scheduler/cluster_file.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/file.h"

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

// Checks that `value` is an object whose fields are all in `known`.
Status CheckObject(const JsonValue& value, const std::string& where,
                   const std::vector<std::string>& known) {
  if (value.type != JsonValue::Type::kObject) {
    return Status::InvalidArgument(where, ": expected an object");
  }
  for (const auto& [name, field] : value.fields) {
    bool found = false;
    for (const std::string& k : known) found = found || k == name;
    if (!found) return Status::InvalidArgument(where, ": unknown field \"", name, "\"");
  }
  return Status::OK();
}

// `value.key` as a number >= 0 into `*out` (left as is when absent).
Status ReadNumber(const JsonValue& value, const std::string& key, const std::string& where,
                  double* out) {
  const JsonValue* field = value.Find(key);
  if (field == nullptr) return Status::OK();
  if (field->type != JsonValue::Type::kNumber) {
    return Status::InvalidArgument(where, ".", key, ": expected a number >= 0");
  }
  char* end = nullptr;
  const double number = std::strtod(field->text.c_str(), &end);
  if (*end != '\0' || !(number >= 0)) {
    return Status::InvalidArgument(where, ".", key, ": expected a number >= 0, got ", field->text);
  }
  *out = number;
  return Status::OK();
}

Status ReadInt(const JsonValue& value, const std::string& key, const std::string& where, int lo,
               int* out) {
  double number = *out;
  EMBER_RETURN_IF_ERROR(ReadNumber(value, key, where, &number));
  if (number < lo || number > 1e6 || number != static_cast<int>(number)) {
    return Status::InvalidArgument(where, ".", key, ": expected an integer >= ", lo, ", got ",
                                   number);
  }
  *out = static_cast<int>(number);
  return Status::OK();
}

// The array `value.key` (empty when absent).
Result<std::vector<const JsonValue*>> ReadArray(const JsonValue& value, const std::string& key,
                                                const std::string& where) {
  std::vector<const JsonValue*> out;
  const JsonValue* field = value.Find(key);
  if (field == nullptr) return out;
  if (field->type != JsonValue::Type::kArray) {
    return Status::InvalidArgument(where, ".", key, ": expected an array");
  }
  for (const JsonValue& item : field->items) out.push_back(&item);
  return out;
}

constexpr double kGiB = 1073741824.0;

struct HostSpec {
  std::string name;
  int count = 1;
  std::vector<DeviceNode> sockets, gpus, disks;
  std::vector<std::pair<double, double>> gpu_pcie;  // gbps, latency
  double nvlink_gbps = 0.0, nvlink_latency_us = 0.0;
};

Result<DeviceNode> ReadDevice(const JsonValue& v, const std::string& where, const char* memory_key,
                              int* count) {
  DeviceNode node;
  double memory_gb = 0.0;
  EMBER_RETURN_IF_ERROR(ReadNumber(v, memory_key, where, &memory_gb));
  node.memory_bytes = static_cast<int64_t>(memory_gb * kGiB);
  EMBER_RETURN_IF_ERROR(ReadInt(v, "cores", where, 0, &node.cores));
  EMBER_RETURN_IF_ERROR(ReadInt(v, "count", where, 1, count));
  if (const JsonValue* name = v.Find("name")) {
    if (name->type != JsonValue::Type::kString) {
      return Status::InvalidArgument(where, ".name: expected a string");
    }
    node.model = name->text;
  }
  if (const JsonValue* rates = v.Find("rates")) {
    EMBER_RETURN_IF_ERROR(ReadRates(*rates, where + ".rates", &node.rates));
  }
  return node;
}

Result<HostSpec> ReadHost(const JsonValue& v, const std::string& where) {
  EMBER_RETURN_IF_ERROR(CheckObject(
      v, where, {"name", "count", "sockets", "gpus", "disks", "nvlink_gbps", "nvlink_latency_us"}));
  HostSpec host;
  host.name = "host";
  if (const JsonValue* name = v.Find("name")) {
    if (name->type != JsonValue::Type::kString || name->text.empty()) {
      return Status::InvalidArgument(where, ".name: expected a non-empty string");
    }
    host.name = name->text;
  }
  EMBER_RETURN_IF_ERROR(ReadInt(v, "count", where, 1, &host.count));
  EMBER_RETURN_IF_ERROR(ReadNumber(v, "nvlink_gbps", where, &host.nvlink_gbps));
  EMBER_RETURN_IF_ERROR(ReadNumber(v, "nvlink_latency_us", where, &host.nvlink_latency_us));
  struct Kind {
    const char* key;
    const char* memory_key;
    std::vector<std::string> fields;
    std::vector<DeviceNode>* out;
  };
  for (const Kind& kind :
       {Kind{"sockets",
             "memory_gb",
             {"cores", "memory_gb", "count", "name", "rates"},
             &host.sockets},
        Kind{"gpus",
             "memory_gb",
             {"memory_gb", "count", "name", "rates", "cores", "pcie_gbps", "pcie_latency_us"},
             &host.gpus},
        Kind{"disks", "free_gb", {"free_gb", "count", "name", "rates"}, &host.disks}}) {
    EMBER_ASSIGN_OR_RETURN(auto items, ReadArray(v, kind.key, where));
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string at = where + "." + kind.key + "[" + std::to_string(i) + "]";
      EMBER_RETURN_IF_ERROR(CheckObject(*items[i], at, kind.fields));
      int count = 1;
      EMBER_ASSIGN_OR_RETURN(DeviceNode node, ReadDevice(*items[i], at, kind.memory_key, &count));
      double pcie = 12.0, latency = 10.0;
      EMBER_RETURN_IF_ERROR(ReadNumber(*items[i], "pcie_gbps", at, &pcie));
      EMBER_RETURN_IF_ERROR(ReadNumber(*items[i], "pcie_latency_us", at, &latency));
      if (kind.out == &host.sockets && node.cores < 1) {
        return Status::InvalidArgument(at, ".cores: a socket needs at least one core");
      }
      for (int c = 0; c < count; ++c) {
        kind.out->push_back(node);
        if (kind.out == &host.gpus) host.gpu_pcie.push_back({pcie, latency});
      }
    }
  }
  if (host.sockets.empty())
    return Status::InvalidArgument(where, ".sockets: a host needs a socket");
  return host;
}

}  // namespace

Result<JsonValue> ParseJsonAt(const std::string& text, const std::string& path) {
  Result<JsonValue> value = ParseJson(text);
  if (value.ok()) return value;
  // ParseJson names the byte ("... near byte N: ..."); say line and column.
  const std::string message = value.status().message();
  constexpr std::string_view kNearByte = "near byte ";
  const size_t at = message.find(kNearByte);
  const size_t byte = at == std::string::npos
                          ? 0
                          : std::strtoull(message.c_str() + at + kNearByte.size(), nullptr, 10);
  int line = 1, column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return Status::InvalidArgument(path, ":", line, ":", column, ": malformed JSON (", message, ")");
}

Status ReadRates(const JsonValue& value, const std::string& where, DeviceRates* rates) {
  std::vector<std::string> known;
  for (const auto& [name, field] : RateFields()) known.push_back(name);
  EMBER_RETURN_IF_ERROR(CheckObject(value, where, known));
  for (const auto& [name, field] : RateFields()) {
    EMBER_RETURN_IF_ERROR(ReadNumber(value, name, where, &(rates->*field)));
  }
  return Status::OK();
}

JsonObject RatesJson(const DeviceRates& rates) {
  JsonObject json;
  for (const auto& [name, field] : RateFields()) {
    if (rates.*field > 0) json.Add(name, rates.*field);
  }
  return json;
}

Result<ResourceGraph> ParseClusterFile(const std::string& text, const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const JsonValue root, ParseJsonAt(text, path));
  EMBER_RETURN_IF_ERROR(CheckObject(root, path, {"hosts", "network"}));
  double network_gbps = 12.5, network_latency_us = 10.0;
  if (const JsonValue* network = root.Find("network")) {
    const std::string where = path + ": network";
    EMBER_RETURN_IF_ERROR(CheckObject(*network, where, {"gbps", "latency_us"}));
    EMBER_RETURN_IF_ERROR(ReadNumber(*network, "gbps", where, &network_gbps));
    EMBER_RETURN_IF_ERROR(ReadNumber(*network, "latency_us", where, &network_latency_us));
    if (network_gbps <= 0) return Status::InvalidArgument(where, ".gbps: must be > 0");
  }
  EMBER_ASSIGN_OR_RETURN(auto hosts, ReadArray(root, "hosts", path + ":"));
  if (hosts.empty()) return Status::InvalidArgument(path, ": hosts: expected at least one host");
  ResourceGraph graph;
  std::vector<int> first_cpu;
  for (size_t h = 0; h < hosts.size(); ++h) {
    EMBER_ASSIGN_OR_RETURN(HostSpec spec,
                           ReadHost(*hosts[h], path + ": hosts[" + std::to_string(h) + "]"));
    for (int c = 0; c < spec.count; ++c) {
      const int host = static_cast<int>(graph.hosts.size());
      graph.hosts.push_back(Host{spec.count == 1 ? spec.name : spec.name + std::to_string(c), {}});
      std::vector<int> cpus, gpus;
      for (const DeviceNode& s : spec.sockets)
        cpus.push_back(graph.AddDevice(host, DeviceKind::kCpu, s));
      for (size_t g = 0; g < spec.gpus.size(); ++g) {
        const int d = graph.AddDevice(host, DeviceKind::kGpu, spec.gpus[g]);
        // GPUs hang off the sockets in turn.
        graph.AddLink(cpus[g % cpus.size()], d, LinkKind::kPcie, spec.gpu_pcie[g].first,
                      spec.gpu_pcie[g].second);
        gpus.push_back(d);
      }
      for (const DeviceNode& disk : spec.disks) {
        const int d = graph.AddDevice(host, DeviceKind::kDisk, disk);
        graph.AddLink(cpus[0], d, LinkKind::kPcie,
                      disk.rates.read_gbps > 0 ? disk.rates.read_gbps : 2.0, 80.0);
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
      for (size_t a = 1; a < cpus.size(); ++a)
        graph.AddLink(cpus[0], cpus[a], LinkKind::kPcie, 40.0, 1.0);
      first_cpu.push_back(cpus[0]);
    }
  }
  for (size_t a = 0; a < first_cpu.size(); ++a) {
    for (size_t b = a + 1; b < first_cpu.size(); ++b) {
      graph.AddLink(first_cpu[a], first_cpu[b], LinkKind::kNetwork, network_gbps,
                    network_latency_us);
    }
  }
  return graph;
}

Result<ResourceGraph> ReadClusterFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseClusterFile(text, path);
}

}  // namespace ember::scheduler
