#pragma once

#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

namespace ember::bench {

// A console reporter that also keeps each run's counters, so that a bench's
// main can print ratios against a baseline measured in the same process:
// machines are noisy, ratios taken side by side are not.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override;
  // Counter `counter` of the run named `name`; 0 when absent.
  double Counter(const std::string& name, const std::string& counter) const;
  // Prints "candidate / baseline = ratio" for `counter`.
  void PrintRatio(const std::string& label, const std::string& candidate,
                  const std::string& baseline, const std::string& counter) const;

 private:
  std::map<std::string, std::map<std::string, double>> counters_;
};

}  // namespace ember::bench
