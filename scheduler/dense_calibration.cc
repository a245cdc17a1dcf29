#include "scheduler/dense_calibration.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/file.h"
#include "core/json.h"

namespace ember::scheduler {
namespace {

// The version of the dense cache file; a file of another version is
// measured again.
// Version 2: timings taken while the machine was busy are no longer cached
// (version 1 files may hold such timings, three times too slow).
constexpr int kDenseCalibrationVersion = 2;

// Every point is timed this many times, the rounds apart, and the fastest
// kept: on a shared machine another process's burst can take a whole
// timing (a tenth of a second) and double it, while nothing makes a step
// faster than it is.
constexpr int kDenseCalibrationRounds = 2;
// Extra rounds for the points whose every timing was taken while other work
// kept the process's threads off the cores; a measurement still without a
// clean timing for every point is used but not cached.
constexpr int kDenseCalibrationExtraRounds = 3;

template <typename T>
std::vector<T> SortedUnique(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

template <typename T>
std::string JoinNumbers(const std::vector<T>& values) {
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}

}  // namespace

constexpr auto kDenseStepTimingFields = [](auto& p, auto&& field) {
  field("threads", p.threads);
  field("batch", p.batch);
  field("seconds", p.seconds);
};

void to_json(Json& j, const DenseStepTiming& p) { WriteJsonFields(j, p, kDenseStepTimingFields); }

void from_json(const Json& j, DenseStepTiming& p) {
  ReadJsonFields(j, p, kDenseStepTimingFields);
  if (p.threads < 1) {
    throw JsonFieldError("threads", internal::StrCat("is ", p.threads, "; expected >= 1"));
  }
  if (p.batch < 1) {
    throw JsonFieldError("batch", internal::StrCat("is ", p.batch, "; expected >= 1"));
  }
  if (!(p.seconds > 0)) {
    throw JsonFieldError("seconds", internal::StrCat("is ", p.seconds, "; expected > 0"));
  }
}

namespace {

// The cache file (see DenseCalibrationToJson).
struct DenseCalibrationFile {
  std::string host;
  int version = kDenseCalibrationVersion;
  std::string descriptor;
  std::vector<DenseStepTiming> points;
};

constexpr auto kDenseCalibrationFileFields = [](auto& file, auto&& field) {
  field("host", file.host);
  field("version", file.version);
  field("descriptor", file.descriptor);
  field("points", file.points);
};
void to_json(Json& j, const DenseCalibrationFile& file) {
  WriteJsonFields(j, file, kDenseCalibrationFileFields);
}
void from_json(const Json& j, DenseCalibrationFile& file) {
  ReadJsonFields(j, file, kDenseCalibrationFileFields);
}

}  // namespace

std::vector<int> DenseCalibrationThreads(std::vector<int> candidates) {
  candidates = SortedUnique(std::move(candidates));
  std::erase_if(candidates, [](int t) { return t < 1; });
  if (candidates.size() <= 4) return candidates;
  // Interpolating between powers of two keeps a 64-thread host to 7 points.
  std::vector<int> chosen;
  for (int t : candidates) {
    if (t == candidates.front() || t == candidates.back() || (t & (t - 1)) == 0) {
      chosen.push_back(t);
    }
  }
  return chosen;
}

std::vector<int64_t> DenseCalibrationBatches(std::vector<int64_t> batch_sizes) {
  batch_sizes = SortedUnique(std::move(batch_sizes));
  std::erase_if(batch_sizes, [](int64_t b) { return b < 1; });
  if (batch_sizes.size() <= 2) return batch_sizes;
  return {batch_sizes.front(), batch_sizes.back()};
}

std::string DenseCalibrationDescriptor(const std::string& model_descriptor,
                                       const std::vector<int>& threads,
                                       const std::vector<int64_t>& batches) {
  return model_descriptor + " threads=" + JoinNumbers(threads) + " batch=" + JoinNumbers(batches);
}

std::string DenseCalibrationCachePath(const ResourceGraph& graph, const CalibrationOptions& options,
                                      const std::string& descriptor) {
  const std::string host = CalibrationCachePath(graph, options);
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "%016zx", std::hash<std::string>()(descriptor));
  return host.substr(0, host.size() - 5) + ".dense-" + suffix + ".json";
}

std::string DenseCalibrationToJson(const ResourceGraph& graph, const std::string& descriptor,
                                   const DenseMeasurement& measurement) {
  const DenseCalibrationFile file{graph.host_name(), kDenseCalibrationVersion, descriptor,
                                  measurement.points};
  return JsonText(Json(file), 2) + "\n";
}

Result<DenseMeasurement> DenseCalibrationFromJson(const std::string& text, const std::string& path,
                                                  const ResourceGraph& graph,
                                                  const std::string& descriptor) {
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseJsonText(text, path));
  // Another version's file, or one of another model or points, is measured
  // again, not read.
  if (json.is_object()) {
    const auto version = json.find("version");
    if (version == json.end() || !version->is_number_integer() ||
        version->get<int64_t>() != kDenseCalibrationVersion) {
      return Status::FailedPrecondition(path, ": dense calibration of another version (expected ",
                                        kDenseCalibrationVersion, ")");
    }
    const auto written_for = json.find("descriptor");
    const bool same = written_for != json.end() && written_for->is_string() &&
                      written_for->get<std::string>() == descriptor;
    if (!same) {
      return Status::FailedPrecondition(path, ": dense calibration of another model or points (",
                                        written_for != json.end() && written_for->is_string()
                                            ? written_for->get<std::string>()
                                            : "none",
                                        ", not ", descriptor, ")");
    }
  }
  Result<DenseCalibrationFile> file = FromJson<DenseCalibrationFile>(json);
  if (!file.ok()) return file.status().WithContext(path);
  DenseMeasurement measurement;
  const std::vector<int> cpus = graph.DevicesOf(DeviceKind::kCpu, 0);
  measurement.device = cpus.empty() ? -1 : cpus[0];
  measurement.points = std::move(file->points);
  return measurement;
}

Result<DenseMeasurement> CalibrateDenseStep(const ResourceGraph& graph,
                                            const CalibrationOptions& options,
                                            const std::string& model_descriptor,
                                            const std::vector<int>& threads,
                                            const std::vector<int64_t>& batches,
                                            const DenseStepTimer& timer, bool* from_cache) {
  *from_cache = false;
  const std::vector<int> at_threads = DenseCalibrationThreads(threads);
  const std::vector<int64_t> at_batches = DenseCalibrationBatches(batches);
  const std::string descriptor =
      DenseCalibrationDescriptor(model_descriptor, at_threads, at_batches);
  const std::string path = DenseCalibrationCachePath(graph, options, descriptor);
  if (!options.force && FileExists(path)) {
    EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
    Result<DenseMeasurement> read = DenseCalibrationFromJson(text, path, graph, descriptor);
    if (read.ok()) {
      *from_cache = true;
      return read;
    }
    if (read.status().code() != StatusCode::kFailedPrecondition) {
      return Status::IOError(read.status().message(),
                             " (dense calibration cache; recalibrate to replace it)");
    }
    LOG(INFO) << read.status().message() << "; measuring again";
  }
  DenseMeasurement measurement;
  const std::vector<int> cpus = graph.DevicesOf(DeviceKind::kCpu, 0);
  measurement.device = cpus.empty() ? -1 : cpus[0];
  const auto start = std::chrono::steady_clock::now();
  // Whether a point's kept timing was taken with the cores to itself.
  std::vector<char> clean;
  const auto waited = [&] {
    return options.run_queue_wait_seconds ? options.run_queue_wait_seconds() : 0.0;
  };
  const auto used = [&] {
    return options.process_cpu_seconds ? options.process_cpu_seconds() : 0.0;
  };
  const int max_rounds = kDenseCalibrationRounds + kDenseCalibrationExtraRounds;
  for (int round = 0; round < max_rounds; ++round) {
    const bool extra = round >= kDenseCalibrationRounds;
    if (extra && std::all_of(clean.begin(), clean.end(), [](char c) { return c != 0; })) break;
    size_t point = 0;
    for (int t : at_threads) {
      for (int64_t b : at_batches) {
        if (extra && clean[point]) {
          ++point;
          continue;
        }
        if (options.progress) {
          options.progress("calibrating the dense step (" + model_descriptor + ") on " +
                           std::to_string(t) + " threads, batch " + std::to_string(b) + ", round " +
                           std::to_string(round + 1) +
                           (extra ? " (the machine was busy)"
                                  : " of " + std::to_string(kDenseCalibrationRounds)));
        }
        const double waited_before = waited(), used_before = used();
        const auto timed_at = std::chrono::steady_clock::now();
        EMBER_ASSIGN_OR_RETURN(const double seconds, timer(t, b));
        const double wall = std::max(
            1e-6,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - timed_at).count());
        const bool quiet =
            !MeasuredWhileBusy(options, wall, t, waited() - waited_before, used() - used_before);
        if (round == 0) {
          measurement.points.push_back({t, b, seconds});
          clean.push_back(quiet);
        } else {
          double& kept = measurement.points[point].seconds;
          // A clean timing replaces a busy one; otherwise the faster stays.
          if ((quiet && !clean[point]) || (quiet == (clean[point] != 0) && seconds < kept)) {
            kept = seconds;
            clean[point] = quiet;
          }
        }
        ++point;
      }
    }
  }
  const bool all_clean = std::all_of(clean.begin(), clean.end(), [](char c) { return c != 0; });
  if (options.progress) {
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    char line[96];
    std::snprintf(line, sizeof(line), "dense step calibration took %.2f s", took);
    options.progress(line);
  }
  if (!all_clean) {
    LOG(WARNING) << "dense step calibration: other work kept this process's threads off the "
                 << "cores in every timing of some points; the times are used for this plan but "
                 << "not cached";
  } else if (options.write_cache) {
    Status made = MakeDirectories(std::filesystem::path(path).parent_path().string());
    if (made.ok()) {
      made = WriteFileAtomic(path, DenseCalibrationToJson(graph, descriptor, measurement));
    }
    if (!made.ok()) LOG(WARNING) << "dense calibration not cached: " << made.ToString();
  }
  return measurement;
}

}  // namespace ember::scheduler
