#pragma once

// Dense calibration: the time of one model's whole dense step (the
// trainer's pooling, forward, loss, backward and dense optimizer update),
// measured on this host's CPU at the thread counts and batch sizes the
// planner considers, so that the cost model prices the dense stage from the
// model's own step rather than from the FLOPs and bytes of its ops at one
// GEMM shape's rate (which priced DLRM's dense step 30-45% too fast).
//
// The scheduler does not know how to run a model (that is the engine's);
// the caller passes a DenseStepTimer. Measurements are cached per host and
// per descriptor (the model, its shapes and optimizer, and the points
// measured) next to the host's calibration cache.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/calibration.h"
#include "scheduler/cost_model.h"
#include "scheduler/resource_graph.h"

namespace ember::scheduler {

// Seconds of one dense step of the model at `threads` threads and batch
// `batch` (a median over a few steps after a warm-up); errors of building
// or running the model.
using DenseStepTimer = std::function<Result<double>(int threads, int64_t batch)>;

// The points to measure: every thread count of `candidates` when there are
// at most four, else 1, the powers of two between and the largest (the cost
// model interpolates between them); the smallest and the largest batch of
// `batch_sizes`. Sorted, without repeats.
std::vector<int> DenseCalibrationThreads(std::vector<int> candidates);
std::vector<int64_t> DenseCalibrationBatches(std::vector<int64_t> batch_sizes);

// The whole descriptor of a measurement: the model's (its name, shapes and
// optimizer, as the caller writes it) and the points.
std::string DenseCalibrationDescriptor(const std::string& model_descriptor,
                                       const std::vector<int>& threads,
                                       const std::vector<int64_t>& batches);

// The cache file of the measurement `descriptor` on the host of `graph`:
// beside CalibrationCachePath, with a hash of the descriptor in its name.
std::string DenseCalibrationCachePath(const ResourceGraph& graph, const CalibrationOptions& options,
                                      const std::string& descriptor);

// The cache file's format: the version, the host, the descriptor and the
// points. Reading: InvalidArgument (naming `path`) when malformed;
// FailedPrecondition when written by another version or for another
// descriptor (then the caller measures again). The returned measurement's
// device is the first CPU of `graph`.
std::string DenseCalibrationToJson(const ResourceGraph& graph, const std::string& descriptor,
                                   const DenseMeasurement& measurement);
Result<DenseMeasurement> DenseCalibrationFromJson(const std::string& text, const std::string& path,
                                                  const ResourceGraph& graph,
                                                  const std::string& descriptor);

// The dense step of the model `model_descriptor` on the first CPU of
// `graph` (this host) at DenseCalibrationThreads(threads) x
// DenseCalibrationBatches(batches): read from the cache, or measured with
// `timer` and cached when options.write_cache. Measuring times every point
// twice, in two rounds over the points, and keeps the faster (a progress
// line per timing through options.progress). A timing during which other
// work kept the process's threads off the cores (options.max_busy_threads)
// is taken again, up to three more rounds; a measurement still without a
// clean timing for every point is returned but not cached. options.force
// measures again. `*from_cache` tells which. Errors: IOError for a cache that exists but cannot be
// read or parsed (with its path; force replaces it), and the timer's errors; a cache that cannot be
// written is only logged.
Result<DenseMeasurement> CalibrateDenseStep(const ResourceGraph& graph,
                                            const CalibrationOptions& options,
                                            const std::string& model_descriptor,
                                            const std::vector<int>& threads,
                                            const std::vector<int64_t>& batches,
                                            const DenseStepTimer& timer, bool* from_cache);

}  // namespace ember::scheduler
