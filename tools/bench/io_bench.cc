// Reader throughput (issue 3), as ratios against baselines measured in the
// same run:
//  * binary columnar read rate: ColumnarFile::ReadRows over a whole file of
//    --read_mb MB (in the page cache after the first pass), in batches of
//    --batch_rows rows into one reused Batch, in MB of file per second and
//    rows/s, against a plain memcpy of the same number of bytes from a buffer
//    of the file's size, in chunks of the same bytes per batch into one
//    reused buffer. Two files: Criteo-shaped (13 dense, 26 one-hot slots)
//    and multi-hot (13 dense, 20 one-hot and 6 slots of 0 to 10 keys).
//    Also a first epoch (fresh open, checksums checked as groups are first
//    read) and an open that checks every checksum, against later epochs.
//  * Criteo TSV parse rate: ReadCriteoFiles of --criteo_mb MB (the shared
//    8k-line Kaggle sample concatenated) with 1 and 2 threads, in MB/s and
//    records/s, and the 2-thread / 1-thread scaling; the same through the
//    StreamReader (what `ember train --reader=stream` uses: indexing, pieces,
//    batches of 4096) with 1 and 2 parser threads.
//  * one training core: `ember train`'s default DLRM on 1 thread, trained
//    on the Criteo sample in memory, in records/s, against the stream
//    reader's records per parser CPU-second. Goal: a parse core feeds at
//    least 3 training cores.
//   build/tools/bench/io_bench [--read_mb=300] [--batch_rows=8192]
//       [--criteo_mb=100] [--criteo_sample=PATH] [--bench_dir=/tmp]
//       [benchmark flags]
// Generated files go to a directory under --bench_dir, removed at the end.
// --read_mb=0 or --criteo_mb=0 leaves the cases out.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/status.h"
#include "core/threads.h"
#include "io/columnar.h"
#include "io/criteo.h"
#include "io/stream_reader.h"
#include "engine/trainer.h"
#include "tools/bench/ratio_reporter.h"

namespace {

using ember::Result;
using ember::ProcessCpuSeconds;
using ember::Status;
using ember::io::Batch;
using ember::io::ColumnarFile;
using ember::io::ColumnarShape;

int64_t g_read_mb = 300;
int64_t g_batch_rows = 8192;
int64_t g_criteo_mb = 100;
std::string g_criteo_sample = EMBER_SHARED_DATA_DIR "/criteo/criteo_kaggle_8k.tsv";
std::string g_bench_dir = "/tmp";

std::string g_run_dir;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The machine is shared: "cores" is the process CPU time over the wall time
// of a case (what it actually got), and the per-CPU-second counters are the
// per-core rates whatever the contention.
class CpuMeter {
 public:
  CpuMeter() : wall_start_(std::chrono::steady_clock::now()), cpu_start_(ProcessCpuSeconds()) {}
  double cpu_seconds() const { return ProcessCpuSeconds() - cpu_start_; }
  double cores() const { return cpu_seconds() / std::max(1e-9, SecondsSince(wall_start_)); }

 private:
  std::chrono::steady_clock::time_point wall_start_;
  double cpu_start_;
};

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// --- Binary columnar files -----------------------------------------------------

struct BinaryCase {
  std::string name;         // "onehot", "multihot"
  int multi_hot_slots = 0;  // the last slots; bags of 0 to 10 keys
  std::unique_ptr<ColumnarFile> file;
};

std::vector<BinaryCase> g_binary;
std::vector<char> g_copy_source;  // the memcpy baseline's source, file-sized

constexpr int kDense = 13;
constexpr int kSlots = 26;
constexpr int64_t kWriteBatchRows = 65536;

// Fills `batch` with `rows` random rows; the last `multi_hot` slots get bags
// of 0 to 10 keys, the others one key.
void RandomRows(int64_t rows, int multi_hot, uint64_t* seed, Batch* batch) {
  batch->Clear(kDense, kSlots, 1);
  batch->size = rows;
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t bits = SplitMix64(seed);
    batch->labels.push_back(static_cast<float>(bits & 1));
    for (int d = 0; d < kDense; ++d) {
      batch->dense.push_back(static_cast<float>((bits >> (d * 4)) & 0xFF) / 32.0f);
    }
    for (int s = 0; s < kSlots; ++s) {
      const int keys = s < kSlots - multi_hot ? 1 : static_cast<int>(SplitMix64(seed) % 11);
      for (int k = 0; k < keys; ++k) batch->keys.push_back(SplitMix64(seed));
      batch->offsets.push_back(static_cast<int64_t>(batch->keys.size()));
    }
  }
}

// Writes about `target_bytes` of random rows to `path`.
Status WriteBinaryFile(const std::string& path, int multi_hot, int64_t target_bytes) {
  const ColumnarShape shape{.num_labels = 1, .num_dense = kDense, .num_slots = kSlots};
  EMBER_ASSIGN_OR_RETURN(auto writer, ember::io::ColumnarWriter::Open(path, shape));
  // One-hot slot: 8 bytes a row; multi-hot: 8 bytes of offset and 5 keys.
  const int64_t row_bytes = 4 + 4 * kDense + 8 * (kSlots - multi_hot) + 48 * multi_hot;
  const int64_t rows = std::max<int64_t>(1, target_bytes / row_bytes);
  uint64_t seed = 1 + multi_hot;
  Batch batch;
  for (int64_t done = 0; done < rows; done += kWriteBatchRows) {
    RandomRows(std::min(kWriteBatchRows, rows - done), multi_hot, &seed, &batch);
    EMBER_RETURN_IF_ERROR(writer->Append(batch));
  }
  return writer->Finish();
}

Status PrepareBinaryCases() {
  for (const auto& [name, multi_hot] :
       {std::pair<const char*, int>{"onehot", 0}, {"multihot", 6}}) {
    const auto start = std::chrono::steady_clock::now();
    const std::string path = g_run_dir + "/" + name + ".col";
    std::fprintf(stderr, "[io_bench] writing %s (~%lld MB) ...\n", path.c_str(),
                 static_cast<long long>(g_read_mb));
    EMBER_RETURN_IF_ERROR(WriteBinaryFile(path, multi_hot, g_read_mb * 1000000));
    BinaryCase binary;
    binary.name = name;
    binary.multi_hot_slots = multi_hot;
    EMBER_ASSIGN_OR_RETURN(binary.file, ember::io::OpenColumnar(path));
    // The first epoch's checksum pass, untimed: the cases measure later epochs.
    EMBER_RETURN_IF_ERROR(binary.file->VerifyChecksums());
    std::fprintf(stderr, "[io_bench] %s: %lld rows, %.1f MB, %lld row groups, in %.1f s\n", name,
                 static_cast<long long>(binary.file->rows()), binary.file->file_bytes() / 1e6,
                 static_cast<long long>(binary.file->num_row_groups()), SecondsSince(start));
    g_binary.push_back(std::move(binary));
  }
  int64_t largest = 0;
  for (const BinaryCase& binary : g_binary) largest = std::max(largest, binary.file->file_bytes());
  g_copy_source.assign(largest, 1);  // touches every page
  return Status::OK();
}

// One iteration: every row of the file, batch by batch, into one Batch.
void BM_ReadRows(benchmark::State& state, const BinaryCase* binary) {
  const ColumnarFile& file = *binary->file;
  Batch batch;
  int64_t rows = 0;
  const CpuMeter meter;
  for (auto _ : state) {
    for (int64_t begin = 0; begin < file.rows(); begin += g_batch_rows) {
      const Status status =
          file.ReadRows(begin, std::min(file.rows(), begin + g_batch_rows), &batch);
      if (!status.ok()) {
        state.SkipWithError(status.ToString().c_str());
        return;
      }
      benchmark::DoNotOptimize(batch.keys.data());
    }
    rows += file.rows();
  }
  state.counters["MB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * file.file_bytes() / 1e6,
                         benchmark::Counter::kIsRate);
  state.counters["rows/s"] = benchmark::Counter(rows, benchmark::Counter::kIsRate);
  state.counters["cores"] = meter.cores();
}

// One iteration: the file's bytes from a buffer of its size, in as many
// chunks as BM_ReadRows reads batches, each into one reused buffer.
void BM_Memcpy(benchmark::State& state, const BinaryCase* binary) {
  const int64_t total = binary->file->file_bytes();
  const int64_t batches = (binary->file->rows() + g_batch_rows - 1) / g_batch_rows;
  const int64_t chunk = (total + batches - 1) / batches;
  std::vector<char> destination(chunk, 0);
  const CpuMeter meter;
  for (auto _ : state) {
    for (int64_t offset = 0; offset < total; offset += chunk) {
      std::memcpy(destination.data(), g_copy_source.data() + offset,
                  std::min(chunk, total - offset));
      benchmark::ClobberMemory();
    }
  }
  state.counters["MB/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * total / 1e6,
                                              benchmark::Counter::kIsRate);
  state.counters["rows/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * binary->file->rows(), benchmark::Counter::kIsRate);
  state.counters["cores"] = meter.cores();
}

// One iteration: a first epoch. A fresh open (default policy: each row
// group's checksums are checked when ReadRows first touches it) and every
// row, batch by batch; the file is in the page cache but not yet mapped.
void BM_FirstEpoch(benchmark::State& state, const BinaryCase* binary) {
  Batch batch;
  for (auto _ : state) {
    auto file = ember::io::OpenColumnar(binary->file->path());
    if (!file.ok()) {
      state.SkipWithError(file.status().ToString().c_str());
      return;
    }
    for (int64_t begin = 0; begin < (*file)->rows(); begin += g_batch_rows) {
      const Status status =
          (*file)->ReadRows(begin, std::min((*file)->rows(), begin + g_batch_rows), &batch);
      if (!status.ok()) {
        state.SkipWithError(status.ToString().c_str());
        return;
      }
      benchmark::DoNotOptimize(batch.keys.data());
    }
  }
  state.counters["MB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * binary->file->file_bytes() / 1e6,
                         benchmark::Counter::kIsRate);
}

// One iteration: open the file and check every checksum.
void BM_VerifyChecksums(benchmark::State& state, const BinaryCase* binary) {
  for (auto _ : state) {
    auto file = ember::io::OpenColumnar(binary->file->path(),
                                        {.verify_checksums = ember::io::ChecksumPolicy::kNever});
    const Status status = file.ok() ? (*file)->VerifyChecksums() : file.status();
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
  }
  state.counters["MB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * binary->file->file_bytes() / 1e6,
                         benchmark::Counter::kIsRate);
}

// --- Criteo TSV ------------------------------------------------------------------

std::string g_criteo_path;  // empty when the sample is missing
int64_t g_criteo_bytes = 0;

Status PrepareCriteoFile() {
  if (!ember::FileExists(g_criteo_sample)) {
    std::fprintf(stderr, "[io_bench] %s is missing: Criteo parse cases skipped\n",
                 g_criteo_sample.c_str());
    return Status::OK();
  }
  EMBER_ASSIGN_OR_RETURN(const std::string sample, ember::ReadFile(g_criteo_sample));
  if (sample.empty() || sample.back() != '\n') {
    return Status::InvalidArgument(g_criteo_sample, ": expected lines ending in a newline");
  }
  const int64_t copies =
      std::max<int64_t>(1, (g_criteo_mb * 1000000 + sample.size() - 1) / sample.size());
  const std::string path = g_run_dir + "/criteo.tsv";
  std::fprintf(stderr, "[io_bench] writing %s: %lld copies of %s ...\n", path.c_str(),
               static_cast<long long>(copies), g_criteo_sample.c_str());
  std::ofstream out(path, std::ios::binary);
  for (int64_t i = 0; i < copies; ++i) out.write(sample.data(), sample.size());
  out.close();
  if (!out) return Status::IOError(path, ": write failed");
  g_criteo_path = path;
  g_criteo_bytes = copies * static_cast<int64_t>(sample.size());
  return Status::OK();
}

void BM_CriteoParse(benchmark::State& state, int threads) {
  ember::io::CriteoReadOptions options;
  options.threads = threads;
  int64_t records = 0;
  const CpuMeter meter;
  for (auto _ : state) {
    Result<ember::io::Dataset> data = ember::io::ReadCriteoFiles({g_criteo_path}, options);
    if (!data.ok()) {
      state.SkipWithError(data.status().ToString().c_str());
      return;
    }
    records += data->size();
  }
  state.counters["MB/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * g_criteo_bytes / 1e6, benchmark::Counter::kIsRate);
  state.counters["records/s"] = benchmark::Counter(records, benchmark::Counter::kIsRate);
  const double cpu_seconds = meter.cpu_seconds();
  state.counters["cores"] = meter.cores();
  state.counters["MB/cpu_s"] =
      static_cast<double>(state.iterations()) * g_criteo_bytes / 1e6 / cpu_seconds;
  state.counters["rec/cpu_s"] = records / cpu_seconds;
}

void BM_StreamCriteo(benchmark::State& state, int threads) {
  Result<std::unique_ptr<ember::io::TextFormat>> format = ember::io::NewCriteoFormat();
  if (!format.ok()) {
    state.SkipWithError(format.status().ToString().c_str());
    return;
  }
  ember::io::StreamReaderOptions options;
  options.threads = threads;
  options.batch_size = 4096;
  int64_t records = 0;
  const CpuMeter meter;
  Batch batch;
  for (auto _ : state) {
    auto reader = ember::io::StreamReader::OpenText({g_criteo_path}, **format, options);
    if (!reader.ok()) {
      state.SkipWithError(reader.status().ToString().c_str());
      return;
    }
    while (true) {
      Result<bool> more = (*reader)->Next(&batch);
      if (!more.ok()) {
        state.SkipWithError(more.status().ToString().c_str());
        return;
      }
      if (!*more) break;
      records += batch.size;
    }
  }
  state.counters["MB/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * g_criteo_bytes / 1e6, benchmark::Counter::kIsRate);
  state.counters["records/s"] = benchmark::Counter(records, benchmark::Counter::kIsRate);
  const double cpu_seconds = meter.cpu_seconds();
  state.counters["cores"] = meter.cores();
  state.counters["MB/cpu_s"] =
      static_cast<double>(state.iterations()) * g_criteo_bytes / 1e6 / cpu_seconds;
  state.counters["rec/cpu_s"] = records / cpu_seconds;
}

// One epoch over the Criteo sample in memory per iteration, on 1 thread,
// with the model and optimizers `ember train` uses by default.
void BM_TrainOneCore(benchmark::State& state) {
  Result<ember::io::Dataset> data =
      ember::io::ReadCriteoFiles({g_criteo_sample}, ember::io::CriteoReadOptions{});
  if (!data.ok()) {
    state.SkipWithError(data.status().ToString().c_str());
    return;
  }
  ember::engine::TrainOptions options;
  options.threads = 1;
  options.show_progress = false;
  auto trainer = ember::engine::Trainer::Create(options, data->num_dense(), data->num_slots());
  if (!trainer.ok()) {
    state.SkipWithError(trainer.status().ToString().c_str());
    return;
  }
  int64_t records = 0;
  for (auto _ : state) {
    Result<ember::engine::TrainReport> report = (*trainer)->Fit(*data);
    if (!report.ok()) {
      state.SkipWithError(report.status().ToString().c_str());
      return;
    }
    records += report->examples;
  }
  state.counters["records/s"] = benchmark::Counter(records, benchmark::Counter::kIsRate);
}

// --- Registration and report ---------------------------------------------------

std::string RunName(const std::string& name) { return name + "/real_time"; }
// The Criteo cases run for at least kCriteoMinSeconds (an iteration takes
// about a second); Google Benchmark puts that in their names.
constexpr double kCriteoMinSeconds = 2.0;
std::string CriteoRunName(int threads) {
  return "criteo_tsv/threads:" + std::to_string(threads) + "/min_time:2.000/real_time";
}
std::string StreamRunName(int threads) {
  return "stream_criteo/threads:" + std::to_string(threads) + "/min_time:2.000/real_time";
}
const char kTrainRunName[] = "train_dlrm/threads:1/min_time:2.000/real_time";

void RegisterCases() {
  for (const BinaryCase& binary : g_binary) {
    benchmark::RegisterBenchmark(("memcpy/" + binary.name).c_str(), BM_Memcpy, &binary)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("read_rows/" + binary.name).c_str(), BM_ReadRows, &binary)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("first_epoch/" + binary.name).c_str(), BM_FirstEpoch, &binary)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("verify_checksums/" + binary.name).c_str(), BM_VerifyChecksums,
                                 &binary)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  if (!g_criteo_path.empty()) {
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(("criteo_tsv/threads:" + std::to_string(threads)).c_str(),
                                   BM_CriteoParse, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(kCriteoMinSeconds);
      benchmark::RegisterBenchmark(("stream_criteo/threads:" + std::to_string(threads)).c_str(),
                                   BM_StreamCriteo, threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(kCriteoMinSeconds);
    }
  }
  if (ember::FileExists(g_criteo_sample)) {
    benchmark::RegisterBenchmark("train_dlrm/threads:1", BM_TrainOneCore)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(kCriteoMinSeconds);
  }
}

void PrintReport(const ember::bench::RatioReporter& reporter) {
  if (!g_binary.empty()) {
    std::printf("\nBinary columnar ReadRows vs memcpy of the same bytes (%lld rows a batch):\n",
                static_cast<long long>(g_batch_rows));
    for (const BinaryCase& binary : g_binary) {
      const std::string read = RunName("read_rows/" + binary.name);
      const std::string copy = RunName("memcpy/" + binary.name);
      reporter.PrintRatio(binary.name, read, copy, "MB/s");
      const double c = reporter.Counter(read, "MB/s"), b = reporter.Counter(copy, "MB/s");
      if (c > 0 && b > 0) {
        std::printf("%-44s %.2f  %s\n", ("goal >= 0.50 of memcpy, " + binary.name).c_str(), c / b,
                    c / b >= 0.5 ? "meets 0.50" : "BELOW 0.50");
      }
      reporter.PrintRatio("open + checksums vs ReadRows, " + binary.name,
                          RunName("verify_checksums/" + binary.name), read, "MB/s");
      reporter.PrintRatio("first epoch vs later ones, " + binary.name,
                          RunName("first_epoch/" + binary.name), read, "MB/s");
    }
  }
  if (!g_criteo_path.empty()) {
    std::printf("\nCriteo TSV parse (%.1f MB file):\n", g_criteo_bytes / 1e6);
    for (int threads : {1, 2}) {
      const std::string run = CriteoRunName(threads);
      std::printf(
          "%d thread(s): %8.1f MB/s, %9.0f records/s on %.2f cores; per CPU-second "
          "%8.1f MB, %9.0f records\n",
          threads, reporter.Counter(run, "MB/s"), reporter.Counter(run, "records/s"),
          reporter.Counter(run, "cores"), reporter.Counter(run, "MB/cpu_s"),
          reporter.Counter(run, "rec/cpu_s"));
    }
    reporter.PrintRatio("scaling, 2 threads vs 1 (wall)", CriteoRunName(2), CriteoRunName(1),
                        "records/s");
    reporter.PrintRatio("efficiency, 2 threads vs 1 (per CPU-second)", CriteoRunName(2),
                        CriteoRunName(1), "rec/cpu_s");
    std::printf("\nCriteo TSV through the StreamReader (index + pieces + batches of 4096):\n");
    for (int threads : {1, 2}) {
      const std::string run = StreamRunName(threads);
      std::printf(
          "%d thread(s): %8.1f MB/s, %9.0f records/s on %.2f cores; per CPU-second "
          "%8.1f MB, %9.0f records\n",
          threads, reporter.Counter(run, "MB/s"), reporter.Counter(run, "records/s"),
          reporter.Counter(run, "cores"), reporter.Counter(run, "MB/cpu_s"),
          reporter.Counter(run, "rec/cpu_s"));
    }
    reporter.PrintRatio("stream scaling, 2 threads vs 1 (wall)", StreamRunName(2),
                        StreamRunName(1), "records/s");
    reporter.PrintRatio("stream vs ReadCriteoFiles, 1 thread (wall)", StreamRunName(1),
                        CriteoRunName(1), "records/s");
    const double parse = reporter.Counter(StreamRunName(1), "rec/cpu_s");
    const double train = reporter.Counter(kTrainRunName, "records/s");
    if (parse > 0 && train > 0) {
      std::printf("\nOne training core (default DLRM, 1 thread): %.0f records/s\n", train);
      std::printf("%-44s %.1f  %s\n", "parse core / training core (goal >= 3)", parse / train,
                  parse / train >= 3 ? "meets 3" : "BELOW 3");
    }
  }
}

bool ParseFlags(int argc, char** argv) {
  auto value = [](const char* arg, const char* name) -> const char* {
    const size_t n = std::strlen(name);
    return std::strncmp(arg, name, n) == 0 ? arg + n : nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    if (const char* v = value(argv[i], "--read_mb=")) g_read_mb = std::atoll(v);
    if (const char* v = value(argv[i], "--batch_rows=")) g_batch_rows = std::atoll(v);
    if (const char* v = value(argv[i], "--criteo_mb=")) g_criteo_mb = std::atoll(v);
    if (const char* v = value(argv[i], "--criteo_sample=")) g_criteo_sample = v;
    if (const char* v = value(argv[i], "--bench_dir=")) g_bench_dir = v;
  }
  if (g_read_mb < 0 || g_batch_rows < 1 || g_criteo_mb < 0) {
    std::fprintf(stderr, "io_bench: need --read_mb >= 0, --batch_rows >= 1, --criteo_mb >= 0\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!ParseFlags(argc, argv)) return 1;
  benchmark::Initialize(&argc, argv);
  std::string dir_template = g_bench_dir + "/ember_io_bench.XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    std::fprintf(stderr, "io_bench: cannot create a directory under %s: %s\n", g_bench_dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  g_run_dir = dir_template;
  std::printf("binary files: ~%lld MB each, %lld rows a batch; Criteo TSV: ~%lld MB; under %s\n",
              static_cast<long long>(g_read_mb), static_cast<long long>(g_batch_rows),
              static_cast<long long>(g_criteo_mb), g_run_dir.c_str());
  Status status;
  if (g_read_mb > 0) status = PrepareBinaryCases();
  if (status.ok() && g_criteo_mb > 0) status = PrepareCriteoFile();
  int rc = 0;
  if (!status.ok()) {
    std::fprintf(stderr, "io_bench: %s\n", status.ToString().c_str());
    rc = 1;
  } else {
    RegisterCases();
    ember::bench::RatioReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    PrintReport(reporter);
  }
  g_binary.clear();
  std::error_code error;
  std::filesystem::remove_all(g_run_dir, error);
  benchmark::Shutdown();
  return rc;
}
