// Peak RSS of training a table whose rows take --table_to_budget times its
// memory budget (issue 4): a first pass creates every row, then --steps
// batches of Zipf keys are pulled and pushed (Adagrad). Prints the peak RSS
// (getrusage ru_maxrss) against budget * 1.2 + a fixed overhead: the peak RSS
// of the same binary doing everything but creating the table (libraries,
// batches, buffers; run first, in a child process), plus the disk tier's
// RocksDB memory, which memory_budget_bytes does not cover: its block cache
// and two write buffers (set small here), the rows its Puts gather before a
// sorted write (up to two eighths of a write buffer: RocksDbTierOptions::
// gather_bytes) and --rocksdb_working_mib for its flushes, compactions and
// reads; and the table's per-batch buffers (TableStats::scratch_bytes, the
// most seen after any step), which grow with the batch, not the table.
// A measurement, not a test: exits 0 whichever side of the line it lands.
//   build/tools/bench/embedding_rss [--budget_mib=64] [--table_to_budget=4]
//       [--dim=16] [--steps=300] [--threads=2] [--bench_dir=/tmp]
#include <malloc.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "core/allocator.h"
#include "core/random.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/stored_rows.h"
#include "tools/bench/key_batches.h"

DEFINE_int64(budget_mib, 64, "memory_budget_bytes of the table, in MiB.");
DEFINE_double(table_to_budget, 4.0, "Bytes of all the table's rows over the budget.");
DEFINE_int32(dim, 16, "Floats per embedding row.");
DEFINE_int64(steps, 300, "Training steps on Zipf batches after the pass that creates every row.");
DEFINE_int64(batch_draws, 65536, "Key draws per Zipf batch (deduplicated before Pull).");
DEFINE_int64(pass_keys, 32768, "Keys per batch of the pass that creates every row.");
DEFINE_double(zipf, 1.05, "Zipf exponent of the training keys.");
DEFINE_bool(prefetch, true, "Prefetch the next batch before each Pull.");
DEFINE_bool(lfu, false, "Evict least frequently used rows first (default: least recently used).");
DEFINE_int32(threads, 2, "Threads of the ThreadArena that Pull and Push run in.");
DEFINE_int64(block_cache_mib, 8,
             "RocksDB block cache of the disk tier (disk_block_cache_bytes), in MiB; not "
             "part of the budget, counted in the fixed overhead.");
DEFINE_int64(write_buffer_mib, 4,
             "RocksDB write buffer (memtable) size of the disk tier, in MiB; two may be "
             "alive at once; not part of the budget, counted in the fixed overhead.");
DEFINE_int64(rocksdb_working_mib, 8,
             "RocksDB memory besides its block cache and write buffers, counted in the fixed "
             "overhead: flush and compaction buffers (SST builder, Bloom filter construction, "
             "file buffers) and blocks read by MultiGet. heaptrack puts their peak at 6-9 MiB "
             "with a 4 MiB write buffer.");
DEFINE_bool(tune_allocator, true,
            "Set glibc malloc up as the ember binary does (ember::TuneProcessAllocator); "
            "false measures glibc's defaults.");
DEFINE_string(bench_dir, "/tmp", "Directory under which the disk tier's temporary directory goes.");
DEFINE_string(mode, "measure",
              "measure: run `baseline` in a child process, then `train`, and compare; "
              "train: only train and print the peak RSS; baseline: everything but the table.");

namespace {

using ember::Status;
using ember::embedding::EmbeddingTable;
using ember::embedding::Key;

constexpr uint64_t kSeed = 4;
constexpr double kMiB = 1048576.0;

// The most TableStats::scratch_bytes seen after a step of the train run.
int64_t g_max_scratch_bytes = 0;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double PeakRssMiB(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return usage.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

// glibc's view of the heap: bytes in use by the program, and bytes free
// inside the heap but not returned to the system (fragmentation).
std::string HeapSummary() {
  const struct mallinfo2 info = mallinfo2();
  char text[128];
  std::snprintf(text, sizeof(text), "heap in use %.1f MiB, free in heap %.1f MiB",
                (info.uordblks + info.hblkhd) / kMiB, info.fordblks / kMiB);
  return text;
}

double CurrentRssMiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / kMiB;
}

// Floats of an Adagrad row as embedding/memory_table.cc stores it: dim
// weights, dim accumulators, 5 of RowMeta. Sizes the key range before a table
// exists (the baseline has none); the train run checks it with row_floats().
int64_t AdagradRowFloats(int dim) { return 2 * int64_t{dim} + 5; }

int64_t TableRows(int64_t row_floats) {
  return static_cast<int64_t>(FLAGS_table_to_budget * (FLAGS_budget_mib << 20) /
                              (row_floats * sizeof(float)));
}

// Runs the training loop; without a table (`table` null) it does all the rest:
// draws and deduplicates the batches, fills the buffers.
Status Train(EmbeddingTable* table, int64_t rows, ember::ThreadArena& arena) {
  const int dim = FLAGS_dim;
  std::vector<float> out, grads;
  ember::RandomStream random(kSeed, 1);
  auto step = [&](int64_t index, const std::vector<Key>& keys) -> Status {
    if (grads.size() < keys.size() * dim) {
      out.resize(keys.size() * dim);
      grads.resize(keys.size() * dim);
      for (float& g : grads) g = static_cast<float>(random.Uniform(-0.01, 0.01));
    }
    if (table == nullptr) return Status::OK();
    Status status;
    arena.Execute([&] {
      table->set_step(index);
      status = table->Pull(keys, out.data());
      if (status.ok()) status = table->Push(keys, grads.data());
    });
    g_max_scratch_bytes = std::max(g_max_scratch_bytes, table->stats().scratch_bytes);
    return status;
  };
  // Creates every row.
  const auto start = std::chrono::steady_clock::now();
  int64_t index = 0;
  std::vector<Key> keys;
  for (int64_t begin = 0; begin < rows; begin += FLAGS_pass_keys, ++index) {
    keys.clear();
    for (int64_t k = begin; k < std::min(rows, begin + FLAGS_pass_keys); ++k) keys.push_back(k);
    EMBER_RETURN_IF_ERROR(step(index, keys));
  }
  LOG(INFO) << "pass over " << rows << " rows done in " << SecondsSince(start) << " s; RSS now "
            << CurrentRssMiB() << " MiB; " << HeapSummary();
  ember::bench::KeyBatchOptions options;
  options.rows = rows;
  options.distribution = ember::bench::KeyDistribution::kZipf;
  options.zipf_exponent = FLAGS_zipf;
  options.seed = kSeed;
  const ember::bench::KeyBatches batches(options);
  std::vector<Key> next = batches.DedupedDraws(FLAGS_batch_draws, 0);
  int64_t keys_trained = 0;
  for (int64_t s = 0; s < FLAGS_steps; ++s, ++index) {
    const std::vector<Key> current = std::move(next);
    next = batches.DedupedDraws(FLAGS_batch_draws, s + 1);
    if (FLAGS_prefetch && table != nullptr) table->Prefetch(next);
    EMBER_RETURN_IF_ERROR(step(index, current));
    keys_trained += current.size();
  }
  LOG(INFO) << FLAGS_steps << " Zipf steps (" << keys_trained << " unique keys) done; "
            << SecondsSince(start) << " s in all; RSS now " << CurrentRssMiB() << " MiB; "
            << HeapSummary();
  return Status::OK();
}

// Peak RSS of this binary run with --mode=baseline in a child process, or -1.
double BaselinePeakRssMiB(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  args.push_back("--mode=baseline");  // the last value of a flag wins
  std::vector<char*> child_argv;
  for (std::string& arg : args) child_argv.push_back(arg.data());
  child_argv.push_back(nullptr);
  std::fflush(stdout);
  pid_t pid = 0;
  const int error =
      posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, child_argv.data(), environ);
  if (error != 0) {
    LOG(WARNING) << "cannot run the baseline: " << std::strerror(error);
    return -1;
  }
  int wait_status = 0;
  if (waitpid(pid, &wait_status, 0) != pid || !WIFEXITED(wait_status) ||
      WEXITSTATUS(wait_status) != 0) {
    LOG(WARNING) << "the baseline run failed";
    return -1;
  }
  return PeakRssMiB(RUSAGE_CHILDREN);
}

// Creates the table in a fresh directory under --bench_dir, trains it, prints
// its numbers and removes the directory. Returns the peak RSS, or -1.
double TrainTable(ember::ThreadArena& arena) {
  std::string dir = FLAGS_bench_dir + "/ember_embedding_rss.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    LOG(ERROR) << "cannot create a directory under " << FLAGS_bench_dir << ": "
               << std::strerror(errno);
    return -1;
  }
  ember::embedding::EmbeddingTableOptions options;
  options.dim = FLAGS_dim;
  options.seed = kSeed;
  options.optimizer.type = ember::embedding::SparseOptimizer::kAdagrad;
  options.memory_budget_bytes = FLAGS_budget_mib << 20;
  options.eviction_policy = FLAGS_lfu
                                ? ember::embedding::EmbeddingTableOptions::EvictionPolicy::kLfu
                                : ember::embedding::EmbeddingTableOptions::EvictionPolicy::kLru;
  options.disk_path = dir + "/table";
  options.disk_block_cache_bytes = FLAGS_block_cache_mib << 20;
  options.disk_write_buffer_bytes = FLAGS_write_buffer_mib << 20;
  double peak = -1;
  {
    auto table = ember::embedding::NewEmbeddingTable(options);
    if (!table.ok()) {
      LOG(ERROR) << "cannot create the table: " << table.status().ToString();
    } else {
      const int64_t row_floats = (*table)->stored_rows().row_floats();
      if (row_floats != AdagradRowFloats(FLAGS_dim)) {
        LOG(WARNING) << "rows are " << row_floats << " floats, not " << AdagradRowFloats(FLAGS_dim)
                     << "; sizing the table by the former";
      }
      const int64_t rows = TableRows(row_floats);
      std::printf("table: %lld rows x %lld bytes = %.1f MiB of rows (%.2fx the budget)\n",
                  static_cast<long long>(rows), static_cast<long long>(row_floats * 4),
                  rows * row_floats * 4 / kMiB, rows * row_floats * 4.0 / (FLAGS_budget_mib << 20));
      std::fflush(stdout);
      const Status status = Train(table->get(), rows, arena);
      const ember::embedding::TableStats stats = (*table)->stats();
      std::printf(
          "after training: memory_bytes %.1f MiB, rows %lld (in memory %lld, on disk %lld), "
          "spilled %lld, disk reads %lld, prefetched %lld, current RSS %.1f MiB\n",
          stats.memory_bytes / kMiB, static_cast<long long>(stats.rows),
          static_cast<long long>(stats.memory_rows), static_cast<long long>(stats.disk_rows),
          static_cast<long long>(stats.spilled_rows), static_cast<long long>(stats.disk_reads),
          static_cast<long long>(stats.prefetched_rows), CurrentRssMiB());
      if (status.ok()) {
        peak = PeakRssMiB(RUSAGE_SELF);
      } else {
        LOG(ERROR) << "training stopped: " << status.ToString();
      }
    }
  }
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  return peak;
}

bool ValidFlags() {
  return FLAGS_budget_mib > 0 && FLAGS_table_to_budget > 0 && FLAGS_dim > 0 && FLAGS_steps >= 0 &&
         FLAGS_batch_draws > 0 && FLAGS_pass_keys > 0 && FLAGS_zipf > 0 && FLAGS_threads > 0 &&
         FLAGS_block_cache_mib >= 0 &&
         (FLAGS_mode == "measure" || FLAGS_mode == "train" || FLAGS_mode == "baseline");
}

}  // namespace

int main(int argc, char** argv) {
  // Keep the original command line for the baseline child.
  std::vector<char*> original(argv, argv + argc);
  FLAGS_logtostderr = true;
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_tune_allocator) ember::TuneProcessAllocator();
  if (!ValidFlags()) {
    std::fprintf(stderr, "embedding_rss: invalid flags (see --help)\n");
    return 1;
  }
  ember::ThreadArena arena(FLAGS_threads);
  if (FLAGS_mode == "baseline") {
    const Status status = Train(nullptr, TableRows(AdagradRowFloats(FLAGS_dim)), arena);
    return status.ok() ? 0 : 1;
  }
  double baseline = -1;
  if (FLAGS_mode == "measure") {
    baseline = BaselinePeakRssMiB(static_cast<int>(original.size()), original.data());
  }
  const double budget = FLAGS_budget_mib;
  std::printf("budget: %.1f MiB, dim %d, Adagrad, %s, block cache %lld MiB, %d threads, %s\n",
              budget, FLAGS_dim, FLAGS_lfu ? "LFU" : "LRU",
              static_cast<long long>(FLAGS_block_cache_mib), FLAGS_threads,
              FLAGS_tune_allocator ? "malloc tuned as in ember" : "glibc malloc defaults");
  std::fflush(stdout);
  const double peak = TrainTable(arena);
  if (peak < 0) return 0;
  std::printf("peak RSS: %.1f MiB = %.2fx the budget\n", peak, peak / budget);
  if (baseline < 0) return 0;
  // The disk tier gathers up to an eighth of a write buffer of rows while
  // it writes as much (RocksDbTierOptions::gather_bytes).
  const double gathered = 2.0 * FLAGS_write_buffer_mib / 8.0;
  const double scratch = g_max_scratch_bytes / kMiB;
  const double overhead = baseline + FLAGS_block_cache_mib + 2.0 * FLAGS_write_buffer_mib +
                          gathered + FLAGS_rocksdb_working_mib + scratch;
  const double limit = budget * 1.2 + overhead;
  std::printf(
      "fixed overhead: %.1f MiB = %.1f MiB peak RSS of the same run without the table + %lld "
      "MiB block cache + 2 x %lld MiB write buffers + %.1f MiB gathered writes + %lld MiB "
      "RocksDB working memory + %.1f MiB of the table's batch buffers\n",
      overhead, baseline, static_cast<long long>(FLAGS_block_cache_mib),
      static_cast<long long>(FLAGS_write_buffer_mib), gathered,
      static_cast<long long>(FLAGS_rocksdb_working_mib), scratch);
  std::printf("peak RSS above the overhead: %.1f MiB = %.2fx the budget\n", peak - overhead,
              (peak - overhead) / budget);
  std::printf("limit budget*1.2 + overhead = %.1f MiB: %s (%.1f MiB %s)\n", limit,
              peak <= limit ? "WITHIN" : "OVER", std::abs(limit - peak),
              peak <= limit ? "to spare" : "over");
  return 0;
}
