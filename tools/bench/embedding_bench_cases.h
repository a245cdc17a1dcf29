// The cases of embedding_bench (tools/bench/embedding_bench.cc): the grid it
// runs, the name of each case, and the report it prints from their counters.
#pragma once

#include <string>

#include "tools/bench/key_batches.h"
#include "tools/bench/ratio_reporter.h"

namespace ember::bench {

inline constexpr int kDims[] = {16, 64};
inline constexpr int kBudgetPercents[] = {50, 25, 10};
inline constexpr KeyDistribution kDistributions[] = {KeyDistribution::kZipf,
                                                     KeyDistribution::kUniform};

// A Pull + Push case, below "pullpush/": all in memory when budget_percent
// is 0 (prefetch is then ignored), else with that memory budget.
std::string CaseName(int dim, KeyDistribution distribution, int budget_percent, bool prefetch);
// The random-gather limit of the same keys.
std::string GatherName(int dim, KeyDistribution distribution);
// The RocksDB tier alone on whole batches.
std::string DiskTierName(int dim, KeyDistribution distribution);

// The name the reporter knows a case's run by (timed in real time).
std::string RunName(const std::string& name);

// Prints the ratios, ceilings and goals of the cases `reporter` saw; a line
// whose case was skipped or filtered out says "not measured".
void PrintEmbeddingBenchReport(const RatioReporter& reporter);

}  // namespace ember::bench
