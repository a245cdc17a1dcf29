#include "core/device.h"

namespace ember {

std::string Device::ToString() const {
  if (is_cpu()) return "cpu";
  return "cuda:" + std::to_string(index);
}

std::vector<Device> AvailableDevices() {
  std::vector<Device> devices = {Device::Cpu()};
  const int count = CudaDeviceCount();
  for (int i = 0; i < count; ++i) devices.push_back(Device::Cuda(i));
  return devices;
}

}  // namespace ember
