// Embedding Pull + Push (Adagrad) throughput in unique keys/s (issue 4), all in
// memory and with the memory budget at 50%, 25% and 10% of the all-in-memory
// table (rows beyond it in the RocksDB tier), with and without Prefetch of the
// next batch; beside this machine's random-gather limit measured in the same
// run: the same batches' rows gathered from a flat array and scattered back;
// and beside the RocksDB tier alone (Get and Put of the same keys' rows), the
// ceiling a disk tier puts on a budgeted table. A budgeted table's own tier
// is timed too (tier_share: the share of the table's time spent inside it),
// and the calls it served in each step are replayed on a tier alone right
// after the step (alone_keys/s, and the table's share of it, vs_alone): the
// tier's own ceiling on the rows the table sends it, measured in turns with
// the table.
//   build/tools/bench/embedding_bench [--rows=N] [--unique_keys=U] [--threads=N]
//       [--batches=B] [--warmup_batches=W] [--zipf=S] [--bench_dir=DIR]
//       [benchmark flags]
// A case is one batch of U distinct keys per iteration: Pull, then Push of
// random gradients, in a ThreadArena of --threads threads (Prefetch's own
// background work is the table's and not counted in them). Every step draws a
// fresh batch (untimed), as a stream of training data does; --warmup_batches
// untimed steps first let the memory tier settle on the case's keys. The
// gather cases cycle through a pool of --batches batches (a flat array has
// no cache to defeat).
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/allocator.h"
#include "core/random.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "embedding/rocksdb_tier.h"
#include "embedding/stored_rows.h"
#include "embedding/tier.h"
#include "embedding/tiered_table.h"
#include "tools/bench/embedding_bench_cases.h"
#include "tools/bench/key_batches.h"
#include "tools/bench/ratio_reporter.h"
#include "tools/bench/tier_replay.h"

namespace {

using ember::Result;
using ember::Status;
using ember::bench::CaseName;
using ember::bench::DiskTierName;
using ember::bench::GatherName;
using ember::bench::kDims;
using ember::bench::kDistributions;
using ember::bench::KeyDistribution;
using ember::embedding::EmbeddingTable;
using ember::embedding::Key;

int64_t g_rows = 2'000'000;
int64_t g_unique_keys = 50'000;
int64_t g_batches = 64;
int64_t g_warmup_batches = 16;
double g_zipf = 1.05;
int g_threads = 2;
std::string g_bench_dir = "/tmp";
std::string g_policy = "lfu";  // ember train's default (--embedding_eviction)
int64_t g_disk_cache_mib = 8;
int64_t g_disk_write_buffer_mib = 16;  // The table's default (EmbeddingTableOptions).

// Set up in main, used by every case.
std::unique_ptr<ember::ThreadArena> g_arena;
std::string g_run_dir;

// Keys per Pull while pre-populating a table.
constexpr int64_t kPopulateKeys = 1 << 16;
constexpr uint64_t kSeed = 4;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The pool of batches of one distribution, drawn once (in parallel; each
// batch depends only on its index) and cycled through by every case.
const std::vector<std::vector<Key>>& Batches(KeyDistribution distribution) {
  static std::map<KeyDistribution, std::vector<std::vector<Key>>> pools;
  auto& pool = pools[distribution];
  if (pool.empty()) {
    const auto start = std::chrono::steady_clock::now();
    ember::bench::KeyBatchOptions options;
    options.rows = g_rows;
    options.distribution = distribution;
    options.zipf_exponent = g_zipf;
    options.seed = kSeed;
    const ember::bench::KeyBatches batches(options);
    pool.resize(g_batches);
    g_arena->Execute([&] {
      ember::ParallelFor(0, g_batches, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) pool[b] = batches.UniqueBatch(g_unique_keys, b);
      });
    });
    std::fprintf(stderr, "[embedding_bench] %lld %s batches of %lld unique keys drawn in %.1f s\n",
                 static_cast<long long>(g_batches), KeyDistributionName(distribution),
                 static_cast<long long>(g_unique_keys), SecondsSince(start));
  }
  return pool;
}

std::vector<float> RandomFloats(int64_t n, float scale, uint64_t stream) {
  std::vector<float> values(n);
  ember::RandomStream random(kSeed, stream);
  for (float& v : values) v = static_cast<float>(random.Uniform(-scale, scale));
  return values;
}

// --- Random-gather limit -----------------------------------------------------

// The flat R x dim array of the gather cases; one dim at a time, released
// before the tables are built.
struct FlatRows {
  int dim = 0;
  std::vector<float> rows;
};
std::unique_ptr<FlatRows> g_flat;

std::vector<float>& Flat(int dim) {
  if (g_flat == nullptr || g_flat->dim != dim) {
    g_flat.reset();
    g_flat = std::make_unique<FlatRows>();
    g_flat->dim = dim;
    g_flat->rows = RandomFloats(g_rows * dim, 0.1f, 1);  // touches every page
  }
  return g_flat->rows;
}

// One iteration: copy the batch's rows (dim floats each) into a buffer, then
// back, one memcpy per row, in parallel chunks in the arena.
void BM_RandomGather(benchmark::State& state, int dim, KeyDistribution distribution) {
  const auto& batches = Batches(distribution);
  float* rows = Flat(dim).data();
  std::vector<float> buffer(g_unique_keys * dim);
  const size_t row_bytes = dim * sizeof(float);
  int64_t keys = 0, next = 0;
  for (auto _ : state) {
    const std::vector<Key>& batch = batches[next++ % batches.size()];
    g_arena->Execute([&] {
      ember::ParallelFor(0, batch.size(), 1024, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          std::memcpy(&buffer[i * dim], rows + batch[i] * dim, row_bytes);
        }
      });
      ember::ParallelFor(0, batch.size(), 1024, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          std::memcpy(rows + batch[i] * dim, &buffer[i * dim], row_bytes);
        }
      });
    });
    benchmark::ClobberMemory();
    keys += batch.size();
  }
  state.counters["keys/s"] = benchmark::Counter(keys, benchmark::Counter::kIsRate);
}

// Calls visit(keys) for the keys [0, --rows) in chunks of kPopulateKeys, in
// order, until it returns an error; returns that error or OK.
Status ForEachPopulateChunk(const std::function<Status(const std::vector<Key>&)>& visit) {
  std::vector<Key> keys;
  for (int64_t begin = 0; begin < g_rows; begin += kPopulateKeys) {
    keys.clear();
    for (Key k = begin; k < static_cast<Key>(std::min(begin + kPopulateKeys, g_rows)); ++k) {
      keys.push_back(k);
    }
    EMBER_RETURN_IF_ERROR(visit(keys));
  }
  return Status::OK();
}

// --- Disk-tier limit ----------------------------------------------------------

// The RocksDB tier alone, as a budgeted table uses it: one iteration reads the
// rows of a batch's keys with Get and writes them back with Put (a table that
// misses a key reads its row, and the row it evicts for it is written back).
// Its rows have 2 * dim floats (a vector and Adagrad's state), a little less
// than a table's, whose rows also carry a few floats of metadata; the pool's
// batches repeat, which lets the block cache help. Both make the tier look
// faster than it is inside a table, so the ceiling reported from it is an
// upper bound.
struct DiskLimitTier {
  int dim = 0;
  std::string path;
  std::unique_ptr<ember::embedding::Tier> tier;
};
std::unique_ptr<DiskLimitTier> g_disk_limit;

void DropDiskLimitTier() {
  if (g_disk_limit == nullptr) return;
  const std::string path = g_disk_limit->path;
  g_disk_limit.reset();
  std::error_code error;
  std::filesystem::remove_all(path, error);
}

Result<ember::embedding::Tier*> DiskLimitTierFor(int dim) {
  if (g_disk_limit != nullptr && g_disk_limit->dim == dim) return g_disk_limit->tier.get();
  DropDiskLimitTier();
  g_flat.reset();
  auto limit = std::make_unique<DiskLimitTier>();
  limit->dim = dim;
  limit->path = g_run_dir + "/disk_limit_dim" + std::to_string(dim);
  ember::embedding::RocksDbTierOptions options;
  options.path = limit->path;
  options.row_bytes = int64_t{2} * dim * int64_t{sizeof(float)};
  options.block_cache_bytes = g_disk_cache_mib << 20;
  options.write_buffer_bytes = g_disk_write_buffer_mib << 20;
  EMBER_ASSIGN_OR_RETURN(limit->tier, ember::embedding::NewRocksDbTier(options));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<float> rows = RandomFloats(kPopulateKeys * 2 * dim, 0.1f, 3);
  EMBER_RETURN_IF_ERROR(ForEachPopulateChunk([&](const std::vector<Key>& keys) {
    return limit->tier->Put(keys, reinterpret_cast<const char*>(rows.data()));
  }));
  std::fprintf(stderr, "[embedding_bench] disk tier alone, dim %d: %lld rows written in %.1f s\n",
               dim, static_cast<long long>(g_rows), SecondsSince(start));
  g_disk_limit = std::move(limit);
  return g_disk_limit->tier.get();
}

void BM_DiskTier(benchmark::State& state, int dim, KeyDistribution distribution) {
  const auto& batches = Batches(distribution);
  Result<ember::embedding::Tier*> acquired = DiskLimitTierFor(dim);
  if (!acquired.ok()) {
    state.SkipWithError(acquired.status().ToString().c_str());
    return;
  }
  ember::embedding::Tier& tier = **acquired;
  const int64_t row_bytes = tier.row_bytes();
  std::vector<char> rows(g_unique_keys * row_bytes);
  int64_t keys = 0, next = 0;
  for (auto _ : state) {
    const std::vector<Key>& batch = batches[next++ % batches.size()];
    const int64_t n = static_cast<int64_t>(batch.size());
    const int64_t chunk = (n + g_threads - 1) / g_threads;
    std::vector<Status> statuses(g_threads);
    g_arena->Execute([&] {
      ember::ParallelFor(0, g_threads, 1, [&](int64_t first, int64_t last) {
        std::vector<int64_t> missing;
        for (int64_t c = first; c < last; ++c) {
          const int64_t begin = c * chunk, end = std::min(n, begin + chunk);
          if (begin >= end) continue;
          const std::vector<Key> part(batch.begin() + begin, batch.begin() + end);
          char* out = rows.data() + begin * row_bytes;
          statuses[c] = tier.Get(part, out, &missing);
          if (statuses[c].ok()) statuses[c] = tier.Put(part, out);
        }
      });
    });
    for (const Status& status : statuses) {
      if (!status.ok()) {
        state.SkipWithError(status.ToString().c_str());
        return;
      }
    }
    keys += n;
  }
  state.counters["rows/s"] = benchmark::Counter(keys, benchmark::Counter::kIsRate);
}

// --- Tables --------------------------------------------------------------------

// The table the current cases share: built and pre-populated once per (dim,
// budget), reused by the cases of both distributions with and without
// Prefetch, then dropped (with its disk directory) for the next one.
struct BenchTable {
  int dim = 0;
  int budget_percent = 0;  // 0: all in memory
  std::string disk_path;   // empty when all in memory
  std::unique_ptr<EmbeddingTable> table;
  // The table's disk tier, timed and recorded step by step; null when all in
  // memory.
  ember::bench::RecordingTier* disk = nullptr;
  // The tier alone: a fresh tier made as the table's, at alone_path, that
  // replays each step of `disk` right after the table made it (Follow).
  std::unique_ptr<ember::embedding::Tier> alone;
  std::string alone_path;
  int alone_key_shards = 0;    // its RocksDbTierOptions::key_shards
  int64_t step = 0;            // the next batch, and the table's step
  double table_seconds = 0;    // in Pull and Push so far
  double step_seconds = 0;     // in timed steps so far, Prefetch included
  double alone_seconds = 0;    // of the tier alone replaying timed steps so far
  std::vector<Key> current;    // the batch of `step`, drawn ahead
  std::string warmed_up_case;  // the case the last warm-up was for
};
std::unique_ptr<BenchTable> g_table;
// memory_bytes() of the populated all-in-memory table of each dim: the base of
// the budgets.
std::map<int, int64_t> g_full_memory_bytes;

void DropTable() {
  if (g_table == nullptr) return;
  const std::string paths[] = {g_table->disk_path, g_table->alone_path};
  g_table.reset();
  for (const std::string& path : paths) {
    std::error_code error;
    if (!path.empty()) std::filesystem::remove_all(path, error);
  }
}

// The options of the bench's tables: those of ember train's with Adagrad.
ember::embedding::EmbeddingTableOptions TableOptions(int dim, int64_t budget_bytes,
                                                     const std::string& disk_path) {
  ember::embedding::EmbeddingTableOptions options;
  options.dim = dim;
  options.seed = kSeed;
  options.optimizer.type = ember::embedding::SparseOptimizer::kAdagrad;
  options.memory_budget_bytes = budget_bytes;
  options.disk_path = disk_path;
  options.disk_block_cache_bytes = g_disk_cache_mib << 20;
  options.disk_write_buffer_bytes = g_disk_write_buffer_mib << 20;
  return options;
}

// The bench's table; `*disk` is set to its disk tier when it has one.
Result<std::unique_ptr<EmbeddingTable>> NewTable(int dim, int64_t budget_bytes,
                                                 const std::string& disk_path,
                                                 ember::bench::RecordingTier** disk) {
  ember::embedding::EmbeddingTableOptions options = TableOptions(dim, budget_bytes, disk_path);
  EMBER_ASSIGN_OR_RETURN(options.eviction_policy, ember::embedding::ParseEvictionPolicy(g_policy));
  *disk = nullptr;
  if (budget_bytes == 0) return ember::embedding::NewEmbeddingTable(options);
  // As NewEmbeddingTable makes it (in a fresh directory), but timed and
  // recorded.
  EMBER_ASSIGN_OR_RETURN(
      auto rocksdb, ember::embedding::NewRocksDbTier(ember::embedding::DiskTierOptions(options)));
  auto recorded = std::make_unique<ember::bench::RecordingTier>(std::move(rocksdb));
  *disk = recorded.get();
  return ember::embedding::NewTieredTable(options, std::move(recorded));
}

// Closes the disk tier's step (when the table has one) and replays it on the
// tier alone; returns the replay's seconds (0 without a disk tier).
Result<double> EndStep(BenchTable& t) {
  if (t.disk == nullptr) return 0.0;
  t.disk->EndStep();
  // In the order the tier alone stores its rows.
  return ember::bench::ReplayTierSteps(t.disk->TakeSteps(), *t.alone, *g_arena, [&](Key key) {
    return ember::embedding::RocksDbTierRank(key, t.alone_key_shards);
  });
}

// Creates every row [0, rows) with Pulls of kPopulateKeys keys, each a step
// of the disk tier's record (when it has one).
Status Populate(BenchTable& t) {
  std::vector<float> out(kPopulateKeys * t.dim);
  return ForEachPopulateChunk([&](const std::vector<Key>& keys) {
    Status status;
    g_arena->Execute([&] { status = t.table->Pull(keys, out.data()); });
    EMBER_RETURN_IF_ERROR(status);
    return EndStep(t).status();
  });
}

Result<std::unique_ptr<BenchTable>> BuildTable(int dim, int budget_percent) {
  auto bench_table = std::make_unique<BenchTable>();
  bench_table->dim = dim;
  bench_table->budget_percent = budget_percent;
  int64_t budget_bytes = 0;
  if (budget_percent > 0) {
    budget_bytes = g_full_memory_bytes.at(dim) * budget_percent / 100;
    bench_table->disk_path =
        g_run_dir + "/dim" + std::to_string(dim) + "_budget" + std::to_string(budget_percent);
  }
  const auto start = std::chrono::steady_clock::now();
  EMBER_ASSIGN_OR_RETURN(bench_table->table,
                         NewTable(dim, budget_bytes, bench_table->disk_path, &bench_table->disk));
  if (budget_percent > 0) {
    bench_table->alone_path = bench_table->disk_path + "_alone";
    const ember::embedding::RocksDbTierOptions alone =
        ember::embedding::DiskTierOptions(TableOptions(dim, budget_bytes, bench_table->alone_path));
    bench_table->alone_key_shards = alone.key_shards;
    EMBER_ASSIGN_OR_RETURN(bench_table->alone, ember::embedding::NewRocksDbTier(alone));
  }
  EMBER_RETURN_IF_ERROR(Populate(*bench_table));
  const ember::embedding::TableStats stats = bench_table->table->stats();
  std::fprintf(stderr,
               "[embedding_bench] dim %d, budget %d%% (%.1f MiB): %lld rows populated in %.1f s; "
               "memory %.1f MiB, %lld rows in memory\n",
               dim, budget_percent, budget_bytes / 1048576.0, static_cast<long long>(stats.rows),
               SecondsSince(start), stats.memory_bytes / 1048576.0,
               static_cast<long long>(budget_percent > 0 ? stats.memory_rows : stats.rows));
  return bench_table;
}

Result<BenchTable*> AcquireTable(int dim, int budget_percent) {
  if (g_table != nullptr && g_table->dim == dim && g_table->budget_percent == budget_percent) {
    return g_table.get();
  }
  DropTable();
  DropDiskLimitTier();
  g_flat.reset();
  if (budget_percent > 0 && g_full_memory_bytes.count(dim) == 0) {
    // The all-in-memory case was filtered out: build its table to measure it.
    EMBER_ASSIGN_OR_RETURN(g_table, BuildTable(dim, 0));
    g_full_memory_bytes[dim] = g_table->table->memory_bytes();
    DropTable();
  }
  EMBER_ASSIGN_OR_RETURN(g_table, BuildTable(dim, budget_percent));
  if (budget_percent == 0) g_full_memory_bytes[dim] = g_table->table->memory_bytes();
  return g_table.get();
}

// The batch of `step`: a fresh draw of --unique_keys keys, as in a stream of
// training data. (Cycling through a fixed pool of batches would be the worst
// case of an LRU memory tier: a pool whose keys outgrow the tier evicts each
// key just before it comes back.)
std::vector<Key> DrawBatch(KeyDistribution distribution, int64_t step) {
  static std::map<KeyDistribution, std::unique_ptr<ember::bench::KeyBatches>> draws;
  auto& batches = draws[distribution];
  if (batches == nullptr) {
    ember::bench::KeyBatchOptions options;
    options.rows = g_rows;
    options.distribution = distribution;
    options.zipf_exponent = g_zipf;
    options.seed = kSeed;
    batches = std::make_unique<ember::bench::KeyBatches>(options);
  }
  // Far from the pool's indices, so that the tables see batches the gather
  // cases did not.
  return batches->UniqueBatch(g_unique_keys, (uint64_t{1} << 32) + static_cast<uint64_t>(step));
}

// One training step: Prefetch of the next step's batch (when asked), Pull and
// Push of this one; then the tier alone replays the step's disk work. Drawing
// the next batch and the replay are not timed when `state` is given; the
// step's seconds and the replay's are added to t.step_seconds and
// t.alone_seconds then.
Status Step(BenchTable& t, KeyDistribution distribution, bool prefetch,
            const std::vector<float>& grads, std::vector<float>* out, int64_t* keys,
            benchmark::State* state) {
  if (t.current.empty()) t.current = DrawBatch(distribution, t.step);
  if (state != nullptr) state->PauseTiming();
  std::vector<Key> next = DrawBatch(distribution, t.step + 1);
  if (state != nullptr) state->ResumeTiming();
  const auto step_start = std::chrono::steady_clock::now();
  if (prefetch) t.table->Prefetch(next);
  Status status;
  const auto start = std::chrono::steady_clock::now();
  g_arena->Execute([&] {
    t.table->set_step(t.step);
    status = t.table->Pull(t.current, out->data());
    if (status.ok()) status = t.table->Push(t.current, grads.data());
  });
  t.table_seconds += SecondsSince(start);
  // With Prefetch, the loaders' work left over (for the next batch) is part
  // of the step: were it left to run beside the tier alone's replay, it
  // would slow the replay and not the table.
  if (status.ok() && prefetch && t.disk != nullptr) {
    std::vector<int64_t> missing;
    status = t.table->stored_rows().ReadRows({}, nullptr, &missing);  // waits for the loaders
  }
  const double step_seconds = SecondsSince(step_start);
  if (state != nullptr) state->PauseTiming();
  Result<double> alone_seconds = EndStep(t);
  if (state != nullptr) {
    state->ResumeTiming();
    t.step_seconds += step_seconds;
    if (alone_seconds.ok()) t.alone_seconds += *alone_seconds;
  }
  if (status.ok()) status = alone_seconds.status();
  ++t.step;
  *keys += t.current.size();
  t.current = std::move(next);
  return status;
}

void BM_PullPush(benchmark::State& state, const std::string& name, int dim,
                 KeyDistribution distribution, int budget_percent, bool prefetch) {
  Result<BenchTable*> acquired = AcquireTable(dim, budget_percent);
  if (!acquired.ok()) {
    state.SkipWithError(acquired.status().ToString().c_str());
    return;
  }
  BenchTable& t = **acquired;
  std::vector<float> out(g_unique_keys * dim);
  const std::vector<float> grads = RandomFloats(g_unique_keys * dim, 0.01f, 2);
  int64_t keys = 0;
  // The memory tier follows the keys of the case before: warm it up on this
  // case's keys once, untimed (benchmark calls this function several times).
  if (t.warmed_up_case != name) {
    t.current = DrawBatch(distribution, t.step);
    if (prefetch) t.table->Prefetch(t.current);
    for (int64_t i = 0; i < g_warmup_batches; ++i) {
      const Status status = Step(t, distribution, prefetch, grads, &out, &keys, nullptr);
      if (!status.ok()) {
        state.SkipWithError(status.ToString().c_str());
        return;
      }
    }
    t.warmed_up_case = name;
  }
  keys = 0;
  const ember::embedding::TableStats before = t.table->stats();
  const double table_seconds_before = t.table_seconds;
  const double step_seconds_before = t.step_seconds;
  const double alone_seconds_before = t.alone_seconds;
  const int64_t tier_nanos_before = t.disk != nullptr ? t.disk->nanos() : 0;
  for (auto _ : state) {
    const Status status = Step(t, distribution, prefetch, grads, &out, &keys, &state);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  const ember::embedding::TableStats after = t.table->stats();
  state.counters["keys/s"] = benchmark::Counter(keys, benchmark::Counter::kIsRate);
  if (budget_percent > 0) {
    const double memory_hits = after.memory_hits - before.memory_hits;
    const double disk_hits = after.disk_hits - before.disk_hits;
    // Share of pulled and pushed keys found in memory, and rows read from disk
    // per key of the batches.
    state.counters["mem_hit"] =
        memory_hits + disk_hits > 0 ? memory_hits / (memory_hits + disk_hits) : 0.0;
    state.counters["disk_rd/key"] =
        keys > 0 ? static_cast<double>(after.disk_reads - before.disk_reads) / keys : 0.0;
    state.counters["disk_wr/key"] =
        keys > 0 ? static_cast<double>(after.disk_writes - before.disk_writes) / keys : 0.0;
    // Rows Prefetch brought into memory per key (its loaders' reads are in
    // disk_rd/key too).
    state.counters["pf/key"] =
        keys > 0 ? static_cast<double>(after.prefetched_rows - before.prefetched_rows) / keys : 0.0;
    state.counters["mem_MiB"] = after.memory_bytes / 1048576.0;
    // The share of its threads' time in Pull and Push the table spent
    // inside its disk tier's calls.
    const double table_thread_seconds = (t.table_seconds - table_seconds_before) * g_threads;
    state.counters["tier_share"] =
        table_thread_seconds > 0
            ? (t.disk->nanos() - tier_nanos_before) * 1e-9 / table_thread_seconds
            : 0.0;
    // The tier alone on the same disk work, replayed step by step right after
    // the table made it: its keys/s of the case, and the table's share of it
    // (the table's seconds are its steps', Prefetch calls and loaders'
    // leftover work included).
    const double alone_seconds = t.alone_seconds - alone_seconds_before;
    const double step_seconds = t.step_seconds - step_seconds_before;
    state.counters["alone_keys/s"] = alone_seconds > 0 ? keys / alone_seconds : 0.0;
    state.counters["vs_alone"] = step_seconds > 0 ? alone_seconds / step_seconds : 0.0;
  }
}

// --- Registration ---------------------------------------------------------------

// Cases run in registration order, which keeps one table alive at a time.
void RegisterCases() {
  auto configure = [](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  for (int dim : kDims) {
    for (KeyDistribution distribution : kDistributions) {
      configure(benchmark::RegisterBenchmark(GatherName(dim, distribution).c_str(), BM_RandomGather,
                                             dim, distribution));
    }
    for (KeyDistribution distribution : kDistributions) {
      configure(benchmark::RegisterBenchmark(DiskTierName(dim, distribution).c_str(), BM_DiskTier,
                                             dim, distribution));
    }
    for (int budget_percent : {0, 50, 25, 10}) {
      for (KeyDistribution distribution : kDistributions) {
        for (bool prefetch : {false, true}) {
          if (budget_percent == 0 && prefetch) continue;  // a no-op without a disk tier
          const std::string name =
              "pullpush/" + CaseName(dim, distribution, budget_percent, prefetch);
          configure(benchmark::RegisterBenchmark(name.c_str(), BM_PullPush, name, dim, distribution,
                                                 budget_percent, prefetch));
        }
      }
    }
  }
}

bool ParseFlags(int argc, char** argv) {
  auto value = [](const char* arg, const char* name) -> const char* {
    const size_t n = std::strlen(name);
    return std::strncmp(arg, name, n) == 0 ? arg + n : nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    if (const char* v = value(argv[i], "--rows=")) g_rows = std::atoll(v);
    if (const char* v = value(argv[i], "--unique_keys=")) g_unique_keys = std::atoll(v);
    if (const char* v = value(argv[i], "--batches=")) g_batches = std::atoll(v);
    if (const char* v = value(argv[i], "--warmup_batches=")) g_warmup_batches = std::atoll(v);
    if (const char* v = value(argv[i], "--zipf=")) g_zipf = std::atof(v);
    if (const char* v = value(argv[i], "--threads=")) g_threads = std::atoi(v);
    if (const char* v = value(argv[i], "--bench_dir=")) g_bench_dir = v;
    if (const char* v = value(argv[i], "--policy=")) g_policy = v;
    if (const char* v = value(argv[i], "--disk_cache_mib=")) g_disk_cache_mib = std::atoll(v);
    if (const char* v = value(argv[i], "--disk_write_buffer_mib=")) {
      g_disk_write_buffer_mib = std::atoll(v);
    }
  }
  if (g_rows < 1 || g_unique_keys < 1 || g_unique_keys > g_rows || g_batches < 2 ||
      g_warmup_batches < 0 || !(g_zipf > 0) || g_threads < 1) {
    std::fprintf(stderr,
                 "embedding_bench: need --rows >= 1, 1 <= --unique_keys <= --rows, "
                 "--batches >= 2, --warmup_batches >= 0, --zipf > 0, --threads >= 1\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!ParseFlags(argc, argv)) return 1;
  ember::TuneProcessAllocator();  // as the ember binary does
  benchmark::Initialize(&argc, argv);
  std::string dir_template = g_bench_dir + "/ember_embedding_bench.XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    std::fprintf(stderr, "embedding_bench: cannot create a directory under %s: %s\n",
                 g_bench_dir.c_str(), std::strerror(errno));
    return 1;
  }
  g_run_dir = dir_template;
  g_arena = std::make_unique<ember::ThreadArena>(g_threads);
  std::printf(
      "rows: %lld, unique keys per batch: %lld, pool: %lld batches, warm-up: %lld batches, "
      "zipf exponent: %.2f, threads: %d (ThreadArena), disk tier under %s\n",
      static_cast<long long>(g_rows), static_cast<long long>(g_unique_keys),
      static_cast<long long>(g_batches), static_cast<long long>(g_warmup_batches), g_zipf,
      g_threads, g_run_dir.c_str());
  RegisterCases();
  ember::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  DropTable();
  DropDiskLimitTier();
  g_flat.reset();
  ember::bench::PrintEmbeddingBenchReport(reporter);
  std::error_code error;
  std::filesystem::remove_all(g_run_dir, error);
  benchmark::Shutdown();
  return 0;
}
