#include "tools/bench/ratio_reporter.h"

#include <cstdio>

namespace ember::bench {

void RatioReporter::ReportRuns(const std::vector<Run>& runs) {
  for (const Run& run : runs) {
    if (run.run_type != Run::RT_Iteration) continue;
    auto& counters = counters_[run.benchmark_name()];
    for (const auto& [name, counter] : run.counters) counters[name] = counter.value;
  }
  ConsoleReporter::ReportRuns(runs);
}

double RatioReporter::Counter(const std::string& name, const std::string& counter) const {
  auto run = counters_.find(name);
  if (run == counters_.end()) return 0.0;
  auto value = run->second.find(counter);
  return value == run->second.end() ? 0.0 : value->second;
}

void RatioReporter::PrintRatio(const std::string& label, const std::string& candidate,
                               const std::string& baseline, const std::string& counter) const {
  const double c = Counter(candidate, counter), b = Counter(baseline, counter);
  std::printf("%-44s %10.2f / %10.2f %s = %.2f\n", label.c_str(), c, b, counter.c_str(),
              b > 0 ? c / b : 0.0);
}

}  // namespace ember::bench
