#include "tools/train_report.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/json.h"
#include "tools/run_curves.h"

namespace ember::tools {

std::string StageSummary(const pipeline::StageTimes& times, double seconds) {
  std::string summary;
  const std::optional<pipeline::Stage> bottleneck = times.Bottleneck();
  for (pipeline::Stage s : pipeline::kAllStages) {
    char part[112];
    std::snprintf(part, sizeof(part), "%s%s %.2fs (busy %.0f%%)%s", summary.empty() ? "" : ", ",
                  pipeline::StageName(s), times.busy_seconds[s],
                  seconds > 0 ? 100.0 * times.busy_seconds[s] / seconds : 0.0,
                  s == bottleneck ? " <- bottleneck" : "");
    summary += part;
  }
  if (bottleneck) {
    char part[96];
    std::snprintf(part, sizeof(part), "; ideal pipeline speed-up %.2fx",
                  times.TotalSeconds() / times.busy_seconds[*bottleneck]);
    summary += part;
  }
  return summary;
}

std::string EmbeddingSummary(const embedding::TableStats& t, double seconds) {
  char line[512];
  int used = std::snprintf(line, sizeof(line),
                           "%lld rows, %.1f MiB in memory, %lld created, %lld evicted (TTL)",
                           static_cast<long long>(t.rows), t.memory_bytes / 1048576.0,
                           static_cast<long long>(t.admitted_keys),
                           static_cast<long long>(t.evicted_rows));
  if (t.rejected_keys > 0 || t.dropped_gradients > 0) {
    used += std::snprintf(line + used, sizeof(line) - used,
                          ", %lld lookups of keys not yet admitted",
                          static_cast<long long>(t.rejected_keys));
  }
  if (t.disk_reads + t.disk_writes + t.disk_rows > 0) {
    const double lookups = static_cast<double>(t.memory_hits + t.disk_hits);
    std::snprintf(line + used, sizeof(line) - used,
                  "; tiers: %lld rows in memory, ~%lld on disk only, %.1f%% memory hits, "
                  "%lld prefetched, %lld spilled, disk %.0f reads/s and %.0f writes/s",
                  static_cast<long long>(t.memory_rows), static_cast<long long>(t.disk_rows),
                  lookups > 0 ? 100.0 * t.memory_hits / lookups : 100.0,
                  static_cast<long long>(t.prefetched_rows),
                  static_cast<long long>(t.spilled_rows),
                  seconds > 0 ? t.disk_reads / seconds : 0.0,
                  seconds > 0 ? t.disk_writes / seconds : 0.0);
  }
  return line;
}

Json TrainReportJson(const engine::TrainReport& report, int64_t timing_warmup_steps) {
  Json train_json = {{"examples", report.examples},
                     {"steps", report.steps},
                     {"samples_per_sec", report.samples_per_sec},
                     {"steady_samples_per_sec", report.steady_samples_per_sec},
                     {"timing_warmup_steps", timing_warmup_steps},
                     {"seconds", report.train_seconds},
                     {"last_epoch_loss", report.last_epoch_loss}};
  Json stages = Json::object();
  for (pipeline::Stage s : pipeline::kAllStages) {
    stages[pipeline::StageName(s)] = report.stage_times.busy_seconds[s];
  }
  train_json["stage_seconds"] = std::move(stages);
  train_json["pipelined"] = report.pipelined;
  train_json["interrupted"] = report.interrupted;
  train_json["resumed_from_step"] = report.resumed_from_step;
  train_json["checkpoints_written"] = report.checkpoints_written;
  train_json["reserved_embedding_rows"] = report.reserved_embedding_rows;
  if (report.pipelined) {
    train_json["staleness_rows"] = report.staleness.rows;
    train_json["pull_waits"] = report.staleness.waits;
    train_json["pull_wait_seconds"] = report.staleness.wait_seconds;
  }
  const embedding::TableStats& t = report.embedding;
  train_json["embedding"] = {{"rows", t.rows},
                             {"memory_bytes", t.memory_bytes},
                             {"scratch_bytes", t.scratch_bytes},
                             {"memory_rows", t.memory_rows},
                             {"disk_rows", t.disk_rows},
                             {"memory_hits", t.memory_hits},
                             {"disk_hits", t.disk_hits},
                             {"prefetched_rows", t.prefetched_rows},
                             {"spilled_rows", t.spilled_rows},
                             {"disk_reads", t.disk_reads},
                             {"disk_writes", t.disk_writes},
                             {"evicted_rows", t.evicted_rows},
                             {"rejected_keys", t.rejected_keys},
                             {"prepared_pulls", t.prepared_pulls},
                             {"exchanged_bytes", t.exchanged_bytes},
                             {"exchanged_bytes_minimum", t.exchanged_bytes_minimum}};
  if (report.moe_choices > 0) {
    train_json["moe"] = {
        {"choices", report.moe_choices},
        {"dropped_choices", report.moe_dropped_choices},
        {"dropped_examples", report.moe_dropped_examples},
        {"dropped_examples_per_step",
         static_cast<double>(report.moe_dropped_examples) / report.steps},
        {"aux_loss_per_step", report.moe_aux_loss_sum / report.steps},
        {"exchanged_bytes", report.moe_exchanged_bytes},
        {"exchange_seconds", report.moe_exchange_seconds}};
  }
  if (!report.history.empty()) train_json["history"] = HistoryJson(report.history);
  return train_json;
}

}  // namespace ember::tools
