#pragma once

// Calibration: short micro-benchmarks (about a second in all) that measure
// the rates of this host's devices for the cost model: the SGEMM rate of one
// core and of all (the fully connected op), memory bandwidth, the embedding
// table's per-key costs (unique, pull of an existing row, push with the
// optimizer, row creation) at two row widths, random reads from the disk
// tier's file system, and pinned host-to-device copies when a GPU is present
// (skipped otherwise). Results are cached per host in a JSON file keyed by
// host name and CPU model, so that later plans cost nothing.

#include <functional>
#include <string>

#include "core/status.h"
#include "core/threads.h"
#include "scheduler/resource_graph.h"

namespace ember::scheduler {

struct CalibrationOptions {
  // Cache directory; empty: $XDG_CACHE_HOME/ember, else ~/.cache/ember.
  std::string cache_dir;
  // Measure again even when the cache has this host.
  bool force = false;
  // Write the measurements to the cache.
  bool write_cache = true;
  // Directory for the disk benchmark's file (the disk tier's file system);
  // empty: the temporary directory.
  std::string disk_dir;
  // Called with a line per benchmark as it starts (progress).
  std::function<void(const std::string&)> progress;
  // Whether other work had the cores during a measurement: this process's
  // threads waited for a CPU (more than max_busy_threads of them on
  // average) while the process got less than busy_cpu_share of the cores
  // it asked for. Waiting alone is not enough: the trainer's own threads
  // (oneDNN's OpenMP team and oneTBB's workers) wait for each other on a
  // quiet machine too, but then the process has its cores. A busy
  // measurement is used but not cached, so that one busy moment does not
  // decide every later plan; the dense step is timed again first. The two
  // probes are test seams (ProcessRunQueueWaitSeconds and
  // ProcessCpuSeconds by default).
  std::function<double()> run_queue_wait_seconds = ProcessRunQueueWaitSeconds;
  std::function<double()> process_cpu_seconds = ProcessCpuSeconds;
  double max_busy_threads = 0.25;
  double busy_cpu_share = 0.75;
};

// Whether a measurement of `wall` seconds that asked for `threads` cores,
// over which the probes of `options` grew by `waited` and `cpu` seconds, was
// taken while other work had the cores (see CalibrationOptions).
bool MeasuredWhileBusy(const CalibrationOptions& options, double wall, double threads,
                       double waited, double cpu);

// The cache file of the host described by `graph` under options.cache_dir.
std::string CalibrationCachePath(const ResourceGraph& graph, const CalibrationOptions& options);

// Fills the rates of the first host's CPU sockets, disk and PCIe links in
// `graph`, from the cache or by measuring. `*from_cache` tells which.
// IOError when the cache exists but cannot be read or parsed (with its path;
// use force to overwrite); a cache of another version is measured again; a
// cache that cannot be written is only logged.
Status Calibrate(ResourceGraph* graph, const CalibrationOptions& options, bool* from_cache);

// Measures the CPU rates of this host (exposed for tests and benches).
DeviceRates MeasureCpuRates(int threads);
// Random 4 KiB reads per second and sequential GB/s in directory `dir`;
// InvalidArgument/IOError if the file cannot be written there.
Result<DeviceRates> MeasureDiskRates(const std::string& dir);
// The embedding table's disk tier in directory `dir`, on tables of
// kSmallTierRows and kLargeTierRows rows: CPU microseconds per row missing
// from memory of its pull and push (tier_*_us_per_miss[_large]), and per row
// created while the memory tier is full (tier_create_us_per_row[_large]);
// errors of the table (e.g. IOError when the directory cannot hold it).
Result<DeviceRates> MeasureTierRates(const std::string& dir);
// GB/s of a pinned host-to-device copy on CUDA device `device`;
// FailedPrecondition without CUDA or a device.
Result<double> MeasurePinnedCopyGbps(int device);

// Serialises the calibrated rates of `graph`'s first host (and reads them
// back into a graph of the same shape): the format of the cache file.
// Reading: InvalidArgument when malformed, FailedPrecondition when written
// by another version of the calibration (Calibrate then measures again).
std::string CalibrationToJson(const ResourceGraph& graph);
Status CalibrationFromJson(const std::string& text, const std::string& path, ResourceGraph* graph);

}  // namespace ember::scheduler
