#include "scheduler/calibration.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/unique_keys.h"
#include "io/dataset.h"
#include "ops/dense_ops.h"
#include "scheduler/cluster_file.h"

namespace ember::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

// The version of the cache file; a cache of another version is measured
// again (2: unique_ns_per_key no longer includes the sort, measured apart;
// 3: tier_create_us_per_row; 4: the disk tier in CPU time, at two sizes;
// 5: create_ns_per_row[_large]; 6: the disk tier gathers its writes into
// sorted WriteBatches, which changes its rates; 7: the disk tier compares
// its keys as integers, and its process keeps one malloc arena: faster).
constexpr int kCalibrationVersion = 7;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The median of `reps` timings of `fn` (the machine is shared: the median
// is what a run of a few minutes sees).
double MedianSeconds(int reps, const std::function<void()>& fn) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    fn();
    times.push_back(Seconds(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// GFLOP/s of the fully connected op forward and backward (three SGEMMs and
// their bias/activation passes: the dense stage's main work) at a layer of
// DLRM's MLPs, 256 examples x 512 -> 256, on `threads` threads.
double MeasureGemmGflops(int threads) {
  constexpr int64_t kBatch = 256, kIn = 512, kOut = 256;
  Tensor x = Tensor::Empty({kBatch, kIn}), w = Tensor::Empty({kOut, kIn});
  Tensor bias = Tensor::Empty({kOut}), y = Tensor::Empty({kBatch, kOut});
  Tensor dy = Tensor::Empty({kBatch, kOut}), dx = Tensor::Empty({kBatch, kIn});
  Tensor dw = Tensor::Empty({kOut, kIn}), db = Tensor::Empty({kOut});
  std::fill_n(x.data<float>(), kBatch * kIn, 0.5f);
  std::fill_n(w.data<float>(), kOut * kIn, 0.01f);
  std::fill_n(bias.data<float>(), kOut, 0.0f);
  std::fill_n(dy.data<float>(), kBatch * kOut, 0.1f);
  ThreadArena arena(threads);
  double seconds = 0.0;
  arena.Execute([&] {
    SetOpenMpThreads(threads);
    auto run = [&] {
      CHECK(ops::FullyConnectedForward(x, w, bias, ops::Activation::kRelu, &y).ok());
      CHECK(ops::FullyConnectedBackward(x, w, y, dy, ops::Activation::kRelu, &dx, &dw, &db).ok());
    };
    run();  // oneDNN's first call sets up its kernels.
    seconds = MedianSeconds(11, run);
  });
  return 3 * 2.0 * kBatch * kIn * kOut / seconds / 1e9;
}

double MeasureMemoryGbps() {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  const double seconds = MedianSeconds(7, [&] { std::memcpy(b.data(), a.data(), kBytes); });
  return 2.0 * kBytes / seconds / 1e9;  // Read and written.
}

// Zipf-like keys of one batch (26 slots, 256 examples).
std::vector<embedding::Key> BatchKeys(std::mt19937_64& rng, int64_t vocabulary, int n) {
  std::vector<embedding::Key> keys(n);
  for (int i = 0; i < n; ++i) {
    // Inverse of a power law: small ranks are frequent.
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    const auto rank = static_cast<int64_t>(std::pow(static_cast<double>(vocabulary), u));
    keys[i] = (static_cast<uint64_t>(i % 26) << 56) ^ (rank * 0x9E3779B97F4A7C15ULL >> 8);
  }
  return keys;
}

struct TableRates {
  double create_ns = 0.0, pull_ns = 0.0, push_ns = 0.0, row_bytes = 0.0;
};

// Per-row create, pull and push cost of an in-memory table of `rows` rows
// of `dim` floats (Adagrad), on one thread: rows are created first (timed:
// the table grows from empty), then pulled and pushed in batches of random
// distinct keys.
TableRates MeasureTable(int dim, int64_t rows) {
  embedding::EmbeddingTableOptions options;
  options.dim = dim;
  auto table = embedding::NewMemoryTable(options);
  CHECK(table.ok()) << "a default in-memory table must be creatable";
  std::vector<embedding::Key> all(rows);
  for (int64_t i = 0; i < rows; ++i)
    all[i] = (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL) >> 4;
  constexpr int64_t kBatch = 4096;
  std::vector<float> values(kBatch * dim, 0.01f);
  TableRates rates;
  ThreadArena arena(1);
  arena.Execute([&] {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < rows; i += kBatch) {
      std::vector<embedding::Key> keys(all.begin() + i, all.begin() + std::min(rows, i + kBatch));
      CHECK((*table)->Pull(keys, values.data()).ok()) << "pulling into an in-memory table";
    }
    rates.create_ns =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / rows *
        1e9;
    std::mt19937_64 rng(7);
    std::vector<std::vector<embedding::Key>> batches(8);
    for (auto& batch : batches) {
      std::sample(all.begin(), all.end(), std::back_inserter(batch), kBatch, rng);
      std::shuffle(batch.begin(), batch.end(), rng);
    }
    size_t next = 0;
    rates.pull_ns =
        MedianSeconds(
            5,
            [&] { CHECK((*table)->Pull(batches[next++ % batches.size()], values.data()).ok()); }) /
        kBatch * 1e9;
    rates.push_ns =
        MedianSeconds(
            5,
            [&] { CHECK((*table)->Push(batches[next++ % batches.size()], values.data()).ok()); }) /
        kBatch * 1e9;
  });
  rates.row_bytes = static_cast<double>((*table)->memory_bytes()) / rows;
  return rates;
}

// Per id: batches of 256 random examples gathered out of an in-memory
// dataset of Criteo's shape (13 dense, 26 slots), as the trainer reads.
double MeasureReadNsPerId() {
  // As many examples as a short run holds, so that the gather misses caches.
  constexpr int64_t kExamples = 200000, kBatch = 256;
  constexpr int kDense = 13, kSlots = 26;
  io::Batch all;
  all.Clear(kDense, kSlots);
  all.size = kExamples;
  all.labels.assign(kExamples, 1.0f);
  all.dense.assign(kExamples * kDense, 0.5f);
  all.offsets.resize(kExamples * kSlots + 1);
  for (int64_t i = 0; i <= kExamples * kSlots; ++i) all.offsets[i] = i;
  all.keys.resize(kExamples * kSlots);
  for (int64_t i = 0; i < kExamples * kSlots; ++i) all.keys[i] = i * 0x9E3779B97F4A7C15ULL;
  const io::Dataset data(std::move(all));
  std::mt19937_64 rng(11);
  std::vector<int64_t> indices(kBatch);
  io::Batch batch;
  const double seconds = MedianSeconds(15, [&] {
    for (int64_t& i : indices) i = static_cast<int64_t>(rng() % kExamples);
    data.GatherBatch(indices, &batch);
  });
  return seconds / (kBatch * kSlots) * 1e9;
}

// Hashing a batch's ids into distinct ones, per id; and sorting the
// distinct keys as the pipelined trainer does for its staleness gate (an
// index sort, then a gather), per key and log2 of their number.
struct UniqueRates {
  double unique_ns_per_key = 0.0;
  double sort_ns_per_key_log2 = 0.0;
};

UniqueRates MeasureUniqueRates() {
  std::mt19937_64 rng(3);
  const std::vector<embedding::Key> keys = BatchKeys(rng, 100000, 256 * 26);
  std::vector<embedding::Key> unique, sorted;
  std::vector<int64_t> index, order;
  UniqueRates rates;
  rates.unique_ns_per_key =
      MedianSeconds(9, [&] { embedding::UniqueKeys(keys, &unique, &index); }) / keys.size() * 1e9;
  const double sort_seconds = MedianSeconds(9, [&] {
    order.resize(unique.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return unique[a] < unique[b]; });
    sorted.resize(unique.size());
    for (size_t i = 0; i < order.size(); ++i) sorted[i] = unique[order[i]];
  });
  const double n = std::max<double>(2, unique.size());
  rates.sort_ns_per_key_log2 = sort_seconds / (n * std::log2(n)) * 1e9;
  return rates;
}

std::string CacheDir(const CalibrationOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/ember";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/ember";
  return (std::filesystem::temp_directory_path() / "ember-cache").string();
}

// Keeps letters, digits, '-' and '_' of a host name for a file name.
std::string FileSafe(const std::string& text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return out;
}

}  // namespace

DeviceRates MeasureCpuRates(int threads) {
  DeviceRates r;
  r.gemm_gflops_per_core = MeasureGemmGflops(1);
  r.gemm_gflops = threads > 1 ? MeasureGemmGflops(threads) : r.gemm_gflops_per_core;
  r.memory_gbps = MeasureMemoryGbps();
  r.read_ns_per_id = MeasureReadNsPerId();
  const UniqueRates unique = MeasureUniqueRates();
  r.unique_ns_per_key = unique.unique_ns_per_key;
  r.sort_ns_per_key_log2 = unique.sort_ns_per_key_log2;
  const TableRates narrow = MeasureTable(16, static_cast<int64_t>(kSmallTableRows));
  const TableRates wide = MeasureTable(64, static_cast<int64_t>(kSmallTableRows));
  const TableRates large = MeasureTable(16, static_cast<int64_t>(kLargeTableRows));
  r.create_ns_per_row = narrow.create_ns;
  r.create_ns_per_row_large = large.create_ns;
  r.pull_ns_per_row_large = large.pull_ns;
  r.push_ns_per_row_large = large.push_ns;
  r.pull_ns_per_row = narrow.pull_ns;
  r.push_ns_per_row = narrow.push_ns;
  r.pull_ns_per_float = std::max(0.0, (wide.pull_ns - narrow.pull_ns) / 48.0);
  r.push_ns_per_float = std::max(0.0, (wide.push_ns - narrow.push_ns) / 48.0);
  // Adagrad: 16 floats of vector and 16 of state.
  r.row_overhead_bytes = std::max(0.0, narrow.row_bytes - 4.0 * 32);
  return r;
}

Result<DeviceRates> MeasureDiskRates(const std::string& dir) {
  constexpr int64_t kFileBytes = int64_t{32} << 20;
  constexpr int64_t kBlock = 4096;
  const std::string path = dir + "/ember-calibration-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return Status::IOError("cannot create ", path, " to measure the disk: ", std::strerror(errno));
  DeviceRates r;
  std::vector<char> block(size_t{1} << 20, 'e');
  Status status;
  for (int64_t at = 0; at < kFileBytes && status.ok(); at += block.size()) {
    if (::pwrite(fd, block.data(), block.size(), at) != static_cast<ssize_t>(block.size())) {
      status = Status::IOError("writing ", path, ": ", std::strerror(errno));
    }
  }
  if (status.ok()) {
    ::fsync(fd);
    auto start = Clock::now();
    for (int64_t at = 0; at < kFileBytes; at += block.size()) {
      if (::pread(fd, block.data(), block.size(), at) <= 0) break;
    }
    r.read_gbps = kFileBytes / Seconds(start) / 1e9;
    // Random block reads, as the disk tier's MultiGet issues them (the page
    // cache answers some, as it does for RocksDB).
    std::mt19937_64 rng(5);
    constexpr int kReads = 4000;
    start = Clock::now();
    for (int i = 0; i < kReads; ++i) {
      const int64_t at = static_cast<int64_t>(rng() % (kFileBytes / kBlock)) * kBlock;
      if (::pread(fd, block.data(), kBlock, at) <= 0) break;
    }
    r.random_reads_per_sec = kReads / Seconds(start);
  }
  ::close(fd);
  ::unlink(path.c_str());
  EMBER_RETURN_IF_ERROR(status);
  return r;
}

namespace {

struct TierCosts {
  double pull_us_per_miss = 0.0, push_us_per_miss = 0.0, create_us_per_row = 0.0;
};

// The disk tier of a table of `rows` rows of dim 16 whose memory tier holds
// an eighth of them, in directory `dir`: CPU microseconds of the process
// (the caller's thread and RocksDB's flushes and compactions) per row
// created while memory is full (the second half of the rows) and per row a
// random batch misses in memory, of its pull and its push.
Result<TierCosts> MeasureTier(const std::string& dir, int64_t rows) {
  constexpr int64_t kBatch = 1024;
  const std::string path = dir + "/ember-calibration-tier-" + std::to_string(::getpid());
  embedding::EmbeddingTableOptions options;
  options.dim = 16;
  // Adagrad rows of dim 16 take about 200 bytes in memory.
  options.memory_budget_bytes = std::max<int64_t>(int64_t{1} << 20, rows / 8 * 200);
  options.disk_path = path;
  TierCosts costs;
  Status status;
  {
    EMBER_ASSIGN_OR_RETURN(auto table, embedding::NewEmbeddingTable(options));
    std::vector<embedding::Key> all(rows);
    for (int64_t i = 0; i < rows; ++i)
      all[i] = (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL) >> 4;
    std::vector<float> values(kBatch * options.dim, 0.01f);
    ThreadArena arena(1);
    arena.Execute([&] {
      double create_cpu = 0.0;
      int64_t spilled = 0;
      for (int64_t i = 0; i < rows && status.ok(); i += kBatch) {
        std::vector<embedding::Key> keys(all.begin() + i, all.begin() + std::min(rows, i + kBatch));
        const bool timed = i >= rows / 2;
        const int64_t spilled_before = table->stats().spilled_rows;
        const double cpu = ProcessCpuSeconds();
        status = table->Pull(keys, values.data());
        if (timed) {
          create_cpu += ProcessCpuSeconds() - cpu;
          spilled += table->stats().spilled_rows - spilled_before;
        }
      }
      costs.create_us_per_row = create_cpu / std::max<int64_t>(1, spilled) * 1e6;
      std::mt19937_64 rng(13);
      double pull = 0.0, push = 0.0;
      int64_t misses = 0;
      for (int b = 0; b < 6 && status.ok(); ++b) {
        std::vector<embedding::Key> batch;
        std::sample(all.begin(), all.end(), std::back_inserter(batch), kBatch, rng);
        const int64_t before = table->stats().disk_reads;
        double cpu = ProcessCpuSeconds();
        status = table->Pull(batch, values.data());
        pull += ProcessCpuSeconds() - cpu;
        misses += table->stats().disk_reads - before;
        cpu = ProcessCpuSeconds();
        if (status.ok()) status = table->Push(batch, values.data());
        push += ProcessCpuSeconds() - cpu;
      }
      misses = std::max<int64_t>(1, misses);
      costs.pull_us_per_miss = pull / misses * 1e6;
      costs.push_us_per_miss = push / misses * 1e6;
    });
  }
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (!status.ok()) return status.WithContext("calibrating the disk tier in " + dir);
  return costs;
}

}  // namespace

Result<DeviceRates> MeasureTierRates(const std::string& dir) {
  EMBER_ASSIGN_OR_RETURN(const TierCosts small,
                         MeasureTier(dir, static_cast<int64_t>(kSmallTierRows)));
  EMBER_ASSIGN_OR_RETURN(const TierCosts large,
                         MeasureTier(dir, static_cast<int64_t>(kLargeTierRows)));
  DeviceRates r;
  r.tier_pull_us_per_miss = small.pull_us_per_miss;
  r.tier_push_us_per_miss = small.push_us_per_miss;
  r.tier_create_us_per_row = small.create_us_per_row;
  r.tier_pull_us_per_miss_large = large.pull_us_per_miss;
  r.tier_push_us_per_miss_large = large.push_us_per_miss;
  r.tier_create_us_per_row_large = large.create_us_per_row;
  return r;
}

std::string CalibrationCachePath(const ResourceGraph& graph, const CalibrationOptions& options) {
  const std::vector<int> cpus = graph.DevicesOf(DeviceKind::kCpu, 0);
  const std::string model = cpus.empty() ? "" : graph.devices[cpus[0]].model;
  const size_t model_hash =
      std::hash<std::string>()(model + "/" + std::to_string(graph.cpu_threads()));
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "%016zx", model_hash);
  return CacheDir(options) + "/calibration-" + FileSafe(graph.host_name()) + "-" + suffix + ".json";
}

namespace {

constexpr char kPcieGbps[] = "pcie_gbps:";

// The cache file: the calibrated rates of each device of a host by its id
// (as a "rates" object of cluster_file.h) and each GPU's measured PCIe
// bandwidth under "pcie_gbps:<gpu id>".
struct CalibrationFile {
  std::string host;
  int version = kCalibrationVersion;
  std::vector<std::pair<std::string, Json>> rates;
  std::vector<std::pair<std::string, double>> pcie_gbps;
};

void to_json(Json& j, const CalibrationFile& file) {
  j = Json{{"host", file.host}, {"version", file.version}};
  for (const auto& [id, rates] : file.rates) j[id] = rates;
  for (const auto& [gpu, gbps] : file.pcie_gbps) j[kPcieGbps + gpu] = gbps;
}

// Every other field is a device's rates, read strictly: a device this host
// lacks is no error (the graph keeps its devices), a misspelt rate is.
void from_json(const Json& j, CalibrationFile& file) {
  JsonFields f(j);
  f.Get("host", &file.host);
  f.Get("version", &file.version);
  for (const auto& [key, value] : j.items()) {
    if (key == "host" || key == "version") continue;
    if (key.rfind(kPcieGbps, 0) == 0) {
      double gbps = 0.0;
      f.Get(key.c_str(), &gbps);
      file.pcie_gbps.emplace_back(key.substr(std::strlen(kPcieGbps)), gbps);
    } else {
      DeviceRates checked;
      f.Get(key.c_str(), &checked);
      file.rates.emplace_back(key, value);
    }
  }
  f.Done();
}

// The PCIe link of a CPU to a GPU, whose bandwidth MeasurePinnedCopyGbps
// measures; not the NVLink between two GPUs (of a cluster file: a host's
// own graph has none), whose bandwidth a single "pcie_gbps:<gpu>" would
// give twice.
bool IsGpuPcie(const ResourceGraph& graph, const Link& link) {
  return link.kind == LinkKind::kPcie && graph.devices[link.a].kind == DeviceKind::kCpu &&
         graph.devices[link.b].kind == DeviceKind::kGpu;
}

}  // namespace

std::string CalibrationToJson(const ResourceGraph& graph) {
  CalibrationFile file;
  file.host = graph.host_name();
  for (int d : graph.hosts.empty() ? std::vector<int>{} : graph.hosts[0].devices) {
    file.rates.emplace_back(graph.devices[d].id, Json(graph.devices[d].rates));
  }
  for (const Link& link : graph.links) {
    if (IsGpuPcie(graph, link) && graph.devices[link.a].host == 0) {
      file.pcie_gbps.emplace_back(graph.devices[link.b].id, link.gbps);
    }
  }
  return JsonText(Json(file), 2) + "\n";
}

Status CalibrationFromJson(const std::string& text, const std::string& path, ResourceGraph* graph) {
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseJsonText(text, path));
  // Another version's file may have other fields: it is measured again,
  // not read.
  const auto version = json.is_object() ? json.find("version") : json.end();
  if (json.is_object() && (version == json.end() || !version->is_number_integer() ||
                           version->get<int64_t>() != kCalibrationVersion)) {
    return Status::FailedPrecondition(path, ": calibration of another version (expected ",
                                      kCalibrationVersion, ")");
  }
  Result<CalibrationFile> file = FromJson<CalibrationFile>(json);
  if (!file.ok()) return file.status().WithContext(path);
  for (const auto& [id, rates] : file->rates) {
    for (int d : graph->hosts.empty() ? std::vector<int>{} : graph->hosts[0].devices) {
      DeviceNode& node = graph->devices[d];
      // The rates the file has replace the node's; the others stay.
      if (node.id == id) {
        EMBER_ASSIGN_OR_RETURN(node.rates, FromJson(rates, node.rates));
      }
    }
  }
  for (const auto& [gpu, gbps] : file->pcie_gbps) {
    for (Link& link : graph->links) {
      if (IsGpuPcie(*graph, link) && graph->devices[link.b].id == gpu) link.gbps = gbps;
    }
  }
  return Status::OK();
}

bool MeasuredWhileBusy(const CalibrationOptions& options, double wall, double threads,
                       double waited, double cpu) {
  wall = std::max(wall, 1e-6);
  const bool waiting = waited > options.max_busy_threads * wall;
  const bool starved = cpu < options.busy_cpu_share * std::max(1.0, threads) * wall;
  VLOG(1) << "measurement of " << wall << " s on " << threads << " threads: waited "
          << waited / wall << " threads, used " << cpu / wall << " cores";
  return waiting && starved;
}

Status Calibrate(ResourceGraph* graph, const CalibrationOptions& options, bool* from_cache) {
  *from_cache = false;
  const std::string path = CalibrationCachePath(*graph, options);
  if (!options.force && FileExists(path)) {
    EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
    Status read = CalibrationFromJson(text, path, graph);
    if (read.code() == StatusCode::kFailedPrecondition) {
      LOG(INFO) << read.message() << "; measuring again";
      CalibrationOptions again = options;
      again.force = true;
      return Calibrate(graph, again, from_cache);
    }
    if (!read.ok()) {
      return Status::IOError(read.message(), " (calibration cache; recalibrate to replace it)");
    }
    *from_cache = true;
    return Status::OK();
  }
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const auto start = Clock::now();
  const double waited_before =
      options.run_queue_wait_seconds ? options.run_queue_wait_seconds() : 0;
  const double cpu_before = options.process_cpu_seconds ? options.process_cpu_seconds() : 0;
  for (int cpu : graph->DevicesOf(DeviceKind::kCpu, 0)) {
    say("calibrating " + graph->devices[cpu].id + ": GEMM, memory bandwidth, embedding pull/push");
    graph->devices[cpu].rates = MeasureCpuRates(graph->devices[cpu].cores);
    // Sockets of one host are alike; measure the first only.
    for (int other : graph->DevicesOf(DeviceKind::kCpu, 0)) {
      graph->devices[other].rates = graph->devices[cpu].rates;
    }
    break;
  }
  for (int disk : graph->DevicesOf(DeviceKind::kDisk, 0)) {
    say("calibrating " + graph->devices[disk].id + ": random reads");
    const std::string dir =
        options.disk_dir.empty() ? graph->devices[disk].model : options.disk_dir;
    Result<DeviceRates> rates = MeasureDiskRates(dir.empty() ? "." : dir);
    if (rates.ok()) {
      graph->devices[disk].rates = *rates;
      say("calibrating " + graph->devices[disk].id + ": the embedding disk tier");
      Result<DeviceRates> tier = MeasureTierRates(dir.empty() ? "." : dir);
      if (tier.ok()) {
        DeviceRates& r = graph->devices[disk].rates;
        r.tier_pull_us_per_miss = tier->tier_pull_us_per_miss;
        r.tier_push_us_per_miss = tier->tier_push_us_per_miss;
        r.tier_create_us_per_row = tier->tier_create_us_per_row;
        r.tier_pull_us_per_miss_large = tier->tier_pull_us_per_miss_large;
        r.tier_push_us_per_miss_large = tier->tier_push_us_per_miss_large;
        r.tier_create_us_per_row_large = tier->tier_create_us_per_row_large;
      } else {
        LOG(WARNING) << "disk tier calibration skipped: " << tier.status().ToString();
      }
    } else {
      LOG(WARNING) << "disk calibration skipped: " << rates.status().ToString();
    }
  }
  for (Link& link : graph->links) {
    const DeviceNode& gpu = graph->devices[link.b];
    if (gpu.kind != DeviceKind::kGpu || gpu.host != 0) continue;
    say("calibrating " + gpu.id + ": pinned host-to-device copies");
    Result<double> gbps = MeasurePinnedCopyGbps(gpu.index);
    if (gbps.ok()) {
      link.gbps = *gbps;
    } else {
      LOG(INFO) << "GPU copy calibration skipped: " << gbps.status().ToString();
    }
  }
  const double took = Seconds(start);
  say("calibration took " + std::to_string(took) + " s");
  const double waited =
      options.run_queue_wait_seconds ? options.run_queue_wait_seconds() - waited_before : 0;
  const double cpu = options.process_cpu_seconds ? options.process_cpu_seconds() - cpu_before : 0;
  const std::vector<int> cpus = graph->DevicesOf(DeviceKind::kCpu, 0);
  const double cores = cpus.empty() ? 1.0 : std::max(1, graph->devices[cpus[0]].cores);
  if (MeasuredWhileBusy(options, took, cores, waited, cpu)) {
    LOG(WARNING) << "calibration: other work had the cores (this process got "
                 << static_cast<int>(100 * cpu / std::max(took * cores, 1e-6))
                 << "% of them); the rates are used for this plan but not cached";
    return Status::OK();
  }
  if (options.write_cache) {
    Status made = MakeDirectories(CacheDir(options));
    if (made.ok()) made = WriteFileAtomic(path, CalibrationToJson(*graph));
    if (!made.ok()) LOG(WARNING) << "calibration not cached: " << made.ToString();
  }
  return Status::OK();
}

}  // namespace ember::scheduler
