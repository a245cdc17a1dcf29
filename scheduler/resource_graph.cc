#include "scheduler/resource_graph.h"

#include <unistd.h>

#include <cstdio>

#include "core/threads.h"

namespace ember::scheduler {

std::string ResourceGraph::Summary() const {
  char line[256];
  std::snprintf(line, sizeof(line), "host %s: %d CPU threads, %.1f GiB memory, %zu CUDA device(s)",
                host_name.c_str(), cpu_threads, memory_bytes / double(int64_t{1} << 30),
                cuda_devices.size());
  return line;
}

ResourceGraph DiscoverLocalHost() {
  ResourceGraph graph;
  char name[256] = {0};
  graph.host_name = ::gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
  graph.cpu_threads = HardwareThreads();
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) graph.memory_bytes = int64_t{pages} * page_size;
  for (int i = 0; i < CudaDeviceCount(); ++i) graph.cuda_devices.push_back(Device::Cuda(i));
  return graph;
}

}  // namespace ember::scheduler
