#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace ember {

enum class DeviceType { kCpu, kCuda };

// A place where tensors live and kernels run.
struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;

  static Device Cpu() { return Device{DeviceType::kCpu, 0}; }
  static Device Cuda(int index) { return Device{DeviceType::kCuda, index}; }

  bool is_cpu() const { return type == DeviceType::kCpu; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  // "cpu" or "cuda:N".
  std::string ToString() const;

  bool operator==(const Device& other) const {
    return type == other.type && index == other.index;
  }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

// Reads "cpu", "cuda" (device 0) or "cuda:N" as ToString writes them;
// InvalidArgument naming `text` otherwise. Whether the device exists is not
// checked.
Result<Device> ParseDevice(const std::string& text);

// True when Ember was built with CUDA support.
bool CudaCompiledIn();

// Number of usable CUDA devices. Zero, never an error, when Ember was built
// without CUDA, when no driver is installed or when no GPU is present.
int CudaDeviceCount();

// True when at least one CUDA device can run kernels.
inline bool CudaDeviceAvailable() { return CudaDeviceCount() > 0; }

// The CPU followed by every CUDA device.
std::vector<Device> AvailableDevices();

}  // namespace ember
