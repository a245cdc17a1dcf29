#include <cstdio>
#include <functional>
#include <string>

#include "tools/bench/embedding_bench_cases.h"

namespace ember::bench {

std::string CaseName(int dim, KeyDistribution distribution, int budget_percent, bool prefetch) {
  std::string name = "dim:" + std::to_string(dim) + "/" + KeyDistributionName(distribution);
  if (budget_percent == 0) return name + "/memory";
  return name + "/budget:" + std::to_string(budget_percent) + "%" +
         (prefetch ? "/prefetch" : "/no_prefetch");
}

std::string GatherName(int dim, KeyDistribution distribution) {
  return "gather/dim:" + std::to_string(dim) + "/" + KeyDistributionName(distribution);
}

std::string DiskTierName(int dim, KeyDistribution distribution) {
  return "disk_tier/dim:" + std::to_string(dim) + "/" + KeyDistributionName(distribution);
}

std::string RunName(const std::string& name) { return name + "/real_time"; }

namespace {

// PrintRatio, or a line saying that a side was not measured (skipped with an
// error, or left out by --benchmark_filter).
void PrintRatioOf(const RatioReporter& reporter, const std::string& label,
                  const std::string& candidate, const std::string& baseline) {
  if (reporter.Counter(RunName(candidate), "keys/s") <= 0 ||
      reporter.Counter(RunName(baseline), "keys/s") <= 0) {
    std::printf("%-44s not measured\n", label.c_str());
    return;
  }
  reporter.PrintRatio(label, RunName(candidate), RunName(baseline), "keys/s");
}

// Calls visit(dim, distribution, budget_percent, prefetch, name) for every
// budgeted case, in report order; `name` is its CaseName.
void ForEachBudgetedCase(
    const std::function<void(int, KeyDistribution, int, bool, const std::string&)>& visit) {
  for (int dim : kDims) {
    for (KeyDistribution distribution : kDistributions) {
      for (int budget_percent : kBudgetPercents) {
        for (bool prefetch : {false, true}) {
          visit(dim, distribution, budget_percent, prefetch,
                CaseName(dim, distribution, budget_percent, prefetch));
        }
      }
    }
  }
}

// The keys/s of the tier alone replaying a budgeted case's disk work, and the
// table's share of it (0 when not measured).
struct AloneCeiling {
  double keys = 0;
  double share = 0;
  bool measured() const { return keys > 0 && share > 0; }
};
AloneCeiling AloneCeilingOf(const RatioReporter& reporter, const std::string& name) {
  const std::string run = RunName("pullpush/" + name);
  return {reporter.Counter(run, "alone_keys/s"), reporter.Counter(run, "vs_alone")};
}

}  // namespace

void PrintEmbeddingBenchReport(const RatioReporter& reporter) {
  std::printf("\nPull+Push (Adagrad) vs the random-gather limit (same keys, same threads):\n");
  for (int dim : kDims) {
    for (KeyDistribution distribution : kDistributions) {
      for (int budget_percent : {0, 50, 25, 10}) {
        for (bool prefetch : {false, true}) {
          if (budget_percent == 0 && prefetch) continue;
          const std::string name = CaseName(dim, distribution, budget_percent, prefetch);
          PrintRatioOf(reporter, name, "pullpush/" + name, GatherName(dim, distribution));
        }
      }
    }
  }
  std::printf("\nBudgeted vs all in memory (same dim and keys):\n");
  ForEachBudgetedCase(
      [&](int dim, KeyDistribution distribution, int, bool, const std::string& name) {
        PrintRatioOf(reporter, name, "pullpush/" + name,
                     "pullpush/" + CaseName(dim, distribution, 0, false));
      });
  std::printf(
      "\nCeiling from the disk tier alone, on whole batches: a budgeted table reads disk_rd/key\n"
      "rows per key from disk and writes about as many back (disk_wr/key), so it cannot exceed\n"
      "(disk tier rows/s) / (disk_rd/key). A loose upper bound: the batches' hot rows, which the\n"
      "tier alone serves from its memtable and cache, are the ones a table keeps in memory, and\n"
      "its database, loaded in the order it stores rows, is tidier than a table's:\n");
  ForEachBudgetedCase([&](int dim, KeyDistribution distribution, int, bool,
                          const std::string& name) {
    const double tier = reporter.Counter(RunName(DiskTierName(dim, distribution)), "rows/s");
    const double memory =
        reporter.Counter(RunName("pullpush/" + CaseName(dim, distribution, 0, false)), "keys/s");
    const double reads = reporter.Counter(RunName("pullpush/" + name), "disk_rd/key");
    const double keys = reporter.Counter(RunName("pullpush/" + name), "keys/s");
    if (tier <= 0 || memory <= 0 || reads <= 0 || keys <= 0) {
      std::printf("%-44s not measured\n", name.c_str());
      return;
    }
    const double ceiling = tier / reads;
    std::printf(
        "%-44s %.2fM rows/s / %.2f = %.2fM keys/s = %.2f of all in memory; the table: "
        "%.2f of it\n",
        name.c_str(), tier / 1e6, reads, ceiling / 1e6, ceiling / memory, keys / ceiling);
  });
  std::printf(
      "\nCeiling from the disk tier as the table uses it: the table's own tier, timed, on the\n"
      "rows it reads and writes; were the table's own work free, it would do --threads / (tier\n"
      "seconds per key) keys/s. Its share of that is tier_share, the share of its threads' time\n"
      "in Pull and Push spent inside the tier (with Prefetch the loaders' tier time counts too,\n"
      "so the share may pass 1: they overlap the tier with the step):\n");
  ForEachBudgetedCase([&](int, KeyDistribution, int, bool, const std::string& name) {
    const double share = reporter.Counter(RunName("pullpush/" + name), "tier_share");
    const double keys = reporter.Counter(RunName("pullpush/" + name), "keys/s");
    if (share <= 0 || keys <= 0) {
      std::printf("%-44s not measured\n", name.c_str());
      return;
    }
    std::printf("%-44s %.2fM keys/s = %.2f of %.2fM keys/s\n", name.c_str(), keys / 1e6, share,
                keys / share / 1e6);
  });
  std::printf(
      "\nCeiling from the disk tier alone, on the rows the table sent it: after each step, the\n"
      "calls the table's tier served in it (with Prefetch, its loaders' too) are replayed on a\n"
      "second tier made as the table's, which has had every call before them: the step's Gets,\n"
      "Puts and Deletes in --threads whole parts. Table and tier alone take turns, step by\n"
      "step, so that both meet the machine alike. The tier alone did the case's disk work at\n"
      "alone_keys/s of the case, the table at vs_alone of that:\n");
  ForEachBudgetedCase([&](int, KeyDistribution, int, bool, const std::string& name) {
    const AloneCeiling alone = AloneCeilingOf(reporter, name);
    if (!alone.measured()) {
      std::printf("%-44s not measured\n", name.c_str());
      return;
    }
    std::printf("%-44s tier alone %.2fM keys/s; the table: %.2fM keys/s = %.2f of it\n",
                name.c_str(), alone.keys / 1e6, alone.keys * alone.share / 1e6, alone.share);
  });
  std::printf(
      "\nGoal (issue 38): budget 10%%, Zipf keys >= 0.90 of the tier alone on the rows the table\n"
      "sent it (vs_alone):\n");
  for (int dim : kDims) {
    for (bool prefetch : {false, true}) {
      const std::string name = CaseName(dim, KeyDistribution::kZipf, 10, prefetch);
      const AloneCeiling alone = AloneCeilingOf(reporter, name);
      if (!alone.measured()) {
        std::printf("%-44s not measured\n", name.c_str());
        continue;
      }
      const double ratio = alone.share;
      std::printf("%-44s %.2f  %s\n", name.c_str(), ratio,
                  ratio >= 0.90 ? "meets 0.90" : "BELOW 0.90");
    }
  }
  std::printf("\nGoal (issue 4): budget 10%%, Zipf keys, prefetch >= 0.60 of all in memory:\n");
  for (int dim : kDims) {
    const double budgeted = reporter.Counter(
        RunName("pullpush/" + CaseName(dim, KeyDistribution::kZipf, 10, true)), "keys/s");
    const double memory = reporter.Counter(
        RunName("pullpush/" + CaseName(dim, KeyDistribution::kZipf, 0, false)), "keys/s");
    if (budgeted <= 0 || memory <= 0) {
      std::printf("dim:%-3d not measured\n", dim);
      continue;
    }
    const double ratio = budgeted / memory;
    std::printf("dim:%-3d %.2f  %s\n", dim, ratio, ratio >= 0.60 ? "meets 0.60" : "BELOW 0.60");
  }
}

}  // namespace ember::bench
