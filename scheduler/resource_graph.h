#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace ember::scheduler {

// The hardware one job may use. This first version describes the local host
// only: its cores, its memory and the CUDA devices present; links, disks and
// calibrated rates come with the cost model.
struct ResourceGraph {
  std::string host_name;
  int cpu_threads = 1;
  int64_t memory_bytes = 0;
  std::vector<Device> cuda_devices;

  // One line: "host x: 2 threads, 23.4 GiB, 0 CUDA devices".
  std::string Summary() const;
};

// Describes this machine. Never fails: unknown values are left at defaults.
ResourceGraph DiscoverLocalHost();

}  // namespace ember::scheduler
