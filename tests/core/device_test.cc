#include "core/device.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

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
  for (const Device& device : {Device::Cpu(), Device::Cuda(0), Device::Cuda(12)}) {
    Result<Device> back = ParseDevice(device.ToString());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(device, *back);
  }
  Result<Device> cuda = ParseDevice("cuda");
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(Device::Cuda(0), *cuda);
  for (const char* wrong : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", ""}) {
    Result<Device> bad = ParseDevice(wrong);
    EXPECT_EQ(StatusCode::kInvalidArgument, bad.status().code()) << wrong;
    EXPECT_NE(std::string::npos, bad.status().message().find("is not a device")) << wrong;
  }
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


TEST(CachingHostAllocatorTest, ReusesFreedBlocksOfTheSameSizeClassUpToItsLimit) {
  CachingHostAllocator allocator(size_t{3} << 20);  // 3 MiB
  // Below the cached size: plain allocations, nothing kept.
  auto small = allocator.Allocate(1000);
  ASSERT_TRUE(small.ok());
  allocator.Deallocate(*small);
  EXPECT_EQ(0u, allocator.cached_bytes());
  // 1 MiB - 50 KiB rounds up to the class of 1 MiB (64 KiB steps): reused.
  auto a = allocator.Allocate(size_t{1} << 20);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(*a) % kHostAlignment);
  static_cast<char*>(*a)[(size_t{1} << 20) - 1] = 7;  // The whole size is usable.
  allocator.Deallocate(*a);
  EXPECT_EQ(size_t{1} << 20, allocator.cached_bytes());
  auto b = allocator.Allocate((size_t{1} << 20) - (50 << 10));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(0u, allocator.cached_bytes());
  // Another class is not served from it.
  auto c = allocator.Allocate(size_t{2} << 20);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*b, *c);
  // The limit: 1 MiB + 2 MiB fit in 3 MiB, a third block is released.
  auto d = allocator.Allocate(size_t{1} << 20);
  ASSERT_TRUE(d.ok());
  allocator.Deallocate(*b);
  allocator.Deallocate(*c);
  EXPECT_EQ(size_t{3} << 20, allocator.cached_bytes());
  allocator.Deallocate(*d);
  EXPECT_EQ(size_t{3} << 20, allocator.cached_bytes());
  // A limit of 0 caches nothing.
  CachingHostAllocator off(0);
  auto e = off.Allocate(size_t{1} << 20);
  ASSERT_TRUE(e.ok());
  off.Deallocate(*e);
  EXPECT_EQ(0u, off.cached_bytes());
}

// Counts what a caching allocator asks of the allocator it wraps.
class CountingAllocator final : public Allocator {
 public:
  Result<void*> Allocate(size_t bytes) override {
    ++allocations;
    return CpuAllocator()->Allocate(bytes);
  }
  void Deallocate(void* ptr) override {
    ++deallocations;
    CpuAllocator()->Deallocate(ptr);
  }
  Device device() const override { return Device::Cpu(); }
  const char* name() const override { return "counting"; }
  int allocations = 0;
  int deallocations = 0;
};

// What PinnedHostAllocator is (a cache over page-locked memory): every block
// comes from the wrapped allocator and goes back to it, past the limit at
// once and the cached ones when the cache ends.
TEST(CachingHostAllocatorTest, WrapsAnotherAllocatorAndReturnsItsBlocks) {
  CountingAllocator upstream;
  {
    CachingHostAllocator allocator(size_t{1} << 20, &upstream);  // 1 MiB
    EXPECT_STREQ("caching_counting", allocator.name());
    auto small = allocator.Allocate(1000);
    ASSERT_TRUE(small.ok());
    allocator.Deallocate(*small);
    EXPECT_EQ(1, upstream.allocations);
    EXPECT_EQ(1, upstream.deallocations);  // Below the cached size.
    auto a = allocator.Allocate(size_t{1} << 20);
    auto b = allocator.Allocate(size_t{1} << 20);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(3, upstream.allocations);
    allocator.Deallocate(*a);  // Kept.
    allocator.Deallocate(*b);  // Past the limit: returned.
    EXPECT_EQ(2, upstream.deallocations);
    auto c = allocator.Allocate(size_t{1} << 20);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(*a, *c);
    EXPECT_EQ(3, upstream.allocations);  // Served from the cache.
    allocator.Deallocate(*c);
  }
  EXPECT_EQ(3, upstream.deallocations);  // The cached block, at the end.
  EXPECT_STREQ("cpu_caching", CachingHostAllocator(0).name());
}

#if defined(__GLIBC__)
// Whether a fresh block of `bytes` from malloc is an mmap of its own. glibc
// applies the threshold only when the heap must grow (a block that fits in
// its free top comes from there), so the top is trimmed first.
bool MallocMaps(size_t bytes) {
  malloc_trim(0);
  const size_t before = mallinfo2().hblks;
  // Volatile, so that the compiler keeps the pair of calls.
  void* volatile block = std::malloc(bytes);
  const bool mapped = mallinfo2().hblks > before;
  std::free(block);
  return mapped;
}

// Whether the heap still holds a block of `bytes` at its top after the block
// is freed (rather than returning it to the system, to fault in again on the
// next malloc).
bool HeapKeepsFreedBlock(size_t bytes) {
  malloc_trim(0);
  void* volatile block = std::malloc(bytes);
  std::memset(block, 1, bytes);
  std::free(block);
  return mallinfo2().keepcost >= bytes;
}

TEST(ProcessAllocatorTest, TheMemoryBudgetsThresholdIsFourMebibytesAndOneWithoutABudget) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator replaces glibc's malloc, whose settings this tests";
#endif
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) {
    GTEST_SKIP() << "MALLOC_MMAP_THRESHOLD_ is set, which both functions leave alone";
  }
  TuneProcessAllocator();
  // The disk tier's memtable arena blocks (2 MiB with 16 MiB memtables)
  // come from the heap; larger blocks are mapped.
  EXPECT_FALSE(MallocMaps(2 << 20));
  EXPECT_FALSE(MallocMaps(80 << 10));
  EXPECT_TRUE(MallocMaps(5 << 20));  // a block of more than 4 MiB
  TuneProcessAllocatorWithoutMemoryBudget();
  EXPECT_FALSE(MallocMaps(80 << 10));
  EXPECT_FALSE(MallocMaps(700 << 10));
  EXPECT_TRUE(MallocMaps(2 << 20));
  // ... and one freed at the top of the heap stays there (oneDNN's 690 KiB
  // single-thread SGEMM buffer).
  if (std::getenv("MALLOC_TOP_PAD_") == nullptr) {
    EXPECT_TRUE(HeapKeepsFreedBlock(700 << 10));
  }
}
#endif

// The smaps line `field` (e.g. "THPeligible:") of the mapping holding
// `address`, or -1 when it is not found.
long SmapsField(const void* address, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t want = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') > line.find(' ') && head >> std::hex >> begin >> dash >> end &&
        dash == '-') {
      inside = begin <= want && want < end;
    } else if (inside && line.rfind(field, 0) == 0) {
      return std::stol(line.substr(field.size()));
    }
  }
  return -1;
}

// Huge-page advice leaves the contents as they were, ignores ranges holding
// no whole 2 MiB page, and marks the mapping as one for huge pages (where
// the kernel offers them: not with transparent huge pages "never").
TEST(AdviseHugePagesTest, KeepsContentsAndMarksTheRangeForHugePages) {
  constexpr size_t kHuge = kHugePageBytes, kBytes = 4 * kHuge;
  void* raw =
      mmap(nullptr, kBytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(MAP_FAILED, raw);
  // madvise splits the mapping at the advised range; keep it inside.
  auto* data = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) &
                                           ~(uintptr_t{kHuge} - 1));
  const size_t n = kBytes / sizeof(uint32_t);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint32_t>(i * 2654435761u);
  AdviseHugePages(nullptr, kBytes);
  AdviseHugePages(data, kHuge - 1);  // No whole huge page: no-op.
  AdviseHugePages(data + 1, kHuge);  // Neither.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  const bool madvise_mode = modes.find("[madvise]") != std::string::npos;
  if (madvise_mode) {
    EXPECT_EQ(0, SmapsField(data, "THPeligible:"));
  }
  AdviseHugePages(data, kBytes);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(static_cast<uint32_t>(i * 2654435761u), data[i]) << "word " << i;
  }
  if (madvise_mode || modes.find("[always]") != std::string::npos) {
    EXPECT_EQ(1, SmapsField(data, "THPeligible:"));
  } else {
    GTEST_LOG_(INFO) << "transparent huge pages are off here (" << modes
                     << "): only the contents are checked";
  }
  munmap(raw, kBytes + kHuge);
}

}  // namespace
}  // namespace ember
