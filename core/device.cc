#include "core/device.h"

#include <charconv>

namespace ember {

Result<Device> ParseDevice(const std::string& text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    int index = -1;
    const char* begin = text.data() + 5;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(begin, end, index);
    if (ec == std::errc() && ptr == end && ptr != begin && index >= 0) return Device::Cuda(index);
  }
  return Status::InvalidArgument("'", text, "' is not a device; use cpu, cuda or cuda:N");
}

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
