#include "core/device.h"

#include <gtest/gtest.h>

#include "core/allocator.h"

namespace ember {
namespace {

TEST(DeviceTest, CpuIsAlwaysFirstAvailableDevice) {
  std::vector<Device> devices = AvailableDevices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(Device::Cpu(), devices[0]);
  EXPECT_EQ(static_cast<size_t>(1 + CudaDeviceCount()), devices.size());
}

TEST(DeviceTest, CudaDeviceCountIsNeverNegative) {
  // Zero on machines without a driver or GPU; an error there is not allowed.
  EXPECT_GE(CudaDeviceCount(), 0);
  if (!CudaCompiledIn()) {
    EXPECT_EQ(0, CudaDeviceCount());
  }
}

TEST(DeviceTest, NamesReadAsUsersWriteThem) {
  EXPECT_EQ("cpu", Device::Cpu().ToString());
  EXPECT_EQ("cuda:1", Device::Cuda(1).ToString());
}

TEST(AllocatorTest, PinnedHostMemoryIsUsableFromTheHost) {
  Result<void*> ptr = PinnedHostAllocator()->Allocate(1000);
  ASSERT_TRUE(ptr.ok());
  static_cast<char*>(*ptr)[999] = 1;
  PinnedHostAllocator()->Deallocate(*ptr);
  EXPECT_TRUE(PinnedHostAllocator()->device().is_cpu());
}

TEST(AllocatorTest, CpuAllocationIsAligned) {
  Result<void*> ptr = CpuAllocator()->Allocate(3);
  ASSERT_TRUE(ptr.ok());
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(*ptr) % kHostAlignment);
  CpuAllocator()->Deallocate(*ptr);
}

TEST(AllocatorTest, HugeHostAllocationIsResourceExhaustedNotACrash) {
  Result<void*> ptr = CpuAllocator()->Allocate(size_t{1} << 62);
  EXPECT_EQ(StatusCode::kResourceExhausted, ptr.status().code());
}

}  // namespace
}  // namespace ember
