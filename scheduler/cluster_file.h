#pragma once

// Cluster files: a ResourceGraph for machines that are not here, as JSON.
//
//   {
//     "hosts": [{
//       "name": "node", "count": 8,          // 8 hosts node0 .. node7
//       "sockets": [{"cores": 32, "memory_gb": 512,
//                    "rates": {"gemm_gflops_per_core": 60, "memory_gbps": 100}}],
//       "gpus": [{"count": 8, "memory_gb": 80, "name": "H100",
//                 "rates": {"gemm_gflops": 400000, "memory_gbps": 3000},
//                 "pcie_gbps": 25, "pcie_latency_us": 5}],
//       "nvlink_gbps": 300, "nvlink_latency_us": 3,     // all GPU pairs of a host
//       "disks": [{"free_gb": 3000, "rates": {"random_reads_per_sec": 500000}}]
//     }],
//     "network": {"gbps": 25, "latency_us": 5}          // between every two hosts
//   }
//
// "rates" takes any field of DeviceRates by its name. Unknown fields are
// errors (a misspelt rate would silently fall back to a default).

#include <string>

#include "core/json.h"
#include "core/status.h"
#include "scheduler/resource_graph.h"

namespace ember::scheduler {

// Parses a cluster file's text; `path` names it in errors, which say what
// is wrong and where (line:column for malformed JSON, the field's path for
// a bad value: "cluster.json: field \"hosts[0].gpus[0].memory_gb\" is -1;
// expected a number >= 0"). Every field is optional (the defaults are those
// above); a field it does not know is an error.
Result<ResourceGraph> ParseClusterFile(const std::string& text, const std::string& path);
Result<ResourceGraph> ReadClusterFile(const std::string& path);

// DeviceRates as a "rates" object: its non-zero fields by name. Reading
// sets the fields present (each a number >= 0) and keeps the others; an
// unknown field is an error.
void to_json(Json& j, const DeviceRates& rates);
void from_json(const Json& j, DeviceRates& rates);

}  // namespace ember::scheduler
