#include "io/synthetic.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <utility>

#include "core/file.h"
#include "core/json.h"
#include "core/random.h"
#include "core/threads.h"
#include "io/columnar.h"
#include "io/delimited_format.h"
#include "io/feature_hash.h"
#include "io/internal/planted_model.h"
#include "io/text_reader.h"

namespace ember::io {
namespace {

using internal::BuildModel;
using internal::ClusterBits;
using internal::ClusterModeNormal;
using internal::DenseCount;
using internal::kDenseMissingRate;
using internal::PlantedModel;
using internal::RawTeacher;
using internal::SlotVocabularies;

constexpr int64_t kChunkRows = 8192;
constexpr int64_t kProgressEveryRows = 100000;
// Largest vocabulary: ids are written as distinct 32-bit hex strings.
constexpr int64_t kMaxVocabulary = int64_t{1} << 32;
// Largest bag of a multi-hot slot.
constexpr int kMaxBagSize = 1024;
// Bound on the planted model's tables (weights, latents, Zipf CDF).
constexpr int64_t kMaxModelBytes = int64_t{2} << 30;
constexpr int kMaxClusters = 16;
constexpr int kMaxClusterUnits = 1024;
// Tasks after the first: how much of the click logit they share.
constexpr double kTaskShare = 0.7;
constexpr int kMaxTasks = 16;

// One drawn row, before it is written in a format.
struct DrawnRow {
  double p = 0.0;
  int cluster = 0;  // Bits of the hidden cluster, before the modulo.
  // With clusters: the probability with the row's cluster's teacher output
  // replaced by the mean of all clusters', what a cluster-blind model sees.
  double blind_p = 0.0;
  bool label = false;
  // Tasks after the first: their probabilities and labels.
  std::vector<double> task_p;
  std::vector<uint8_t> task_labels;
  std::vector<int64_t> dense;  // [num_dense]: the count, or -1 if missing
  std::vector<double> dense_values;  // [num_dense]: LogTransform, 0 if missing
  std::vector<uint32_t> ids;   // scrambled ids of every bag, slot after slot
  std::vector<int> bag_end;    // [num_slots]: end of slot s's bag in ids
  std::vector<int64_t> ranks;  // Zipf ranks, as `ids` (scratch)
  std::vector<float> pooled;   // [interacting_slots x rank] (scratch)
  std::vector<double> pair_input;    // With clusters: the teacher's input (scratch)
};

// A bijective scramble of a 32-bit id per slot (murmur3's fmix32 after a
// slot-dependent xor), so that distinct ids get distinct hex strings and the
// file does not reveal the Zipf rank.
uint32_t ScrambleId(int slot, uint64_t id) {
  uint32_t h = static_cast<uint32_t>(id) ^ static_cast<uint32_t>(Mix64(slot));
  h ^= h >> 16;
  h *= 0x85ebca6bU;
  h ^= h >> 13;
  h *= 0xc2b2ae35U;
  h ^= h >> 16;
  return h;
}

void AppendHex8(uint32_t value, std::string* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char text[8];
  for (int i = 7; i >= 0; --i) {
    text[i] = kDigits[value & 0xf];
    value >>= 4;
  }
  out->append(text, 8);
}

void AppendInt(int64_t value, std::string* out) {
  char text[24];
  const auto result = std::to_chars(text, text + sizeof(text), value);
  out->append(text, result.ptr);
}

// Draws the Zipf rank of one id of `slot`.
int64_t DrawRank(const PlantedModel& model, int slot, RandomStream* rng) {
  const std::vector<double>& cdf = *model.slot_cdf[slot];
  const double u = rng->NextDouble();
  return std::min<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin(),
                           model.vocabulary[slot] - 1);
}

// Draws row `row` from RandomStream(seed, row) into `out`. The order of the
// draws (dense values, then slots, then the label) is what makes the rows of
// the default options the same as those of the first generator.
void DrawRow(const SyntheticOptions& options, const PlantedModel& model, int64_t row,
             DrawnRow* out) {
  RandomStream rng(options.seed, row);
  out->dense.resize(options.num_dense);
  out->dense_values.resize(options.num_dense);
  out->cluster = 0;
  for (int j = 0; j < options.num_dense; ++j) {
    // A cluster feature draws as the others (so that the other features'
    // values do not depend on num_clusters) but is never missing, and its
    // normal goes to the mode of its sign, the cluster's bit j.
    const bool cluster_feature = j < model.cluster_bits;
    const bool missing = rng.Bernoulli(kDenseMissingRate) && !cluster_feature;
    double normal = rng.Normal();
    if (cluster_feature) {
      if (normal > 0.0) out->cluster |= 1 << j;
      normal = ClusterModeNormal(normal);
    }
    const int64_t count = DenseCount(model.dense_mu[j], normal);
    out->dense_values[j] = missing ? 0.0 : LogTransform(static_cast<double>(count));
    out->dense[j] = missing ? -1 : count;
  }
  out->ids.clear();
  out->ranks.clear();
  out->bag_end.resize(options.num_slots);
  for (int s = 0; s < options.num_slots; ++s) {
    const int64_t bag_size =
        s < model.first_multi_hot ? 1 : static_cast<int64_t>(rng.NextBelow(model.max_bag_size + 1));
    for (int64_t k = 0; k < bag_size; ++k) {
      const int64_t id = DrawRank(model, s, &rng);
      out->ranks.push_back(id);
      out->ids.push_back(ScrambleId(s, id));
    }
    out->bag_end[s] = static_cast<int>(out->ids.size());
  }
  // The hidden cluster: its bits from the modes of the cluster features,
  // modulo the clusters. The sums run in the order of the draws, as the
  // first generator added them.
  const int cluster = out->cluster % model.num_clusters;
  double logit = options.bias;
  for (int j = 0; j < options.num_dense; ++j) {
    logit += model.dense_weight[j] * (out->dense_values[j] - model.dense_center[j]);
  }
  for (int s = 0, i = 0; s < options.num_slots; ++s) {
    for (; i < out->bag_end[s]; ++i)
      logit += model.id_weights[model.weight_begin[s] + out->ranks[i]];
  }
  // Each interacting slot's latent vector, summed over its bag (one id for a
  // single-valued slot, copied exactly).
  const int rank = model.rank;
  out->pooled.assign(static_cast<size_t>(model.interacting_slots) * rank, 0.0f);
  for (int a = 0; a < model.interacting_slots; ++a) {
    float* pooled = out->pooled.data() + a * rank;
    for (int i = a == 0 ? 0 : out->bag_end[a - 1]; i < out->bag_end[a]; ++i) {
      const float* v = model.latents.data() + (model.latent_begin[a] + out->ranks[i]) * rank;
      for (int k = 0; k < rank; ++k) pooled[k] += v[k];
    }
  }
  const bool clustered = model.num_clusters > 1;
  out->pair_input.clear();
  for (int a = 0; a < model.interacting_slots; ++a) {
    const float* va = out->pooled.data() + a * rank;
    for (int b = a + 1; b < model.interacting_slots; ++b) {
      const float* vb = out->pooled.data() + b * rank;
      if (!clustered) {
        for (int k = 0; k < rank; ++k) logit += double{va[k]} * vb[k];
      } else {
        double dot = 0.0;
        for (int k = 0; k < rank; ++k) dot += double{va[k]} * vb[k];
        logit += dot;
        out->pair_input.push_back(dot * model.pair_input_scale);
      }
    }
  }
  double blind_logit = logit;
  if (clustered) {
    const int64_t pairs = static_cast<int64_t>(out->pair_input.size());
    const double* x = out->pair_input.data();
    double mean = 0.0;
    for (int c = 0; c < model.num_clusters; ++c) {
      const double y = RawTeacher(model, c, x, pairs) + model.teacher_offset[c];
      if (c == cluster) logit += y;
      mean += y / model.num_clusters;
    }
    blind_logit += mean;
  }
  out->p = 1.0 / (1.0 + std::exp(-logit));
  out->blind_p = 1.0 / (1.0 + std::exp(-blind_logit));
  out->label = rng.Bernoulli(out->p);
  out->task_p.resize(model.num_tasks - 1);
  out->task_labels.resize(model.num_tasks - 1);
  const int64_t weights_per_task = model.weight_begin.back();
  for (int t = 1; t < model.num_tasks; ++t) {
    const float* weights = model.task_weights.data() + (t - 1) * weights_per_task;
    double task_logit = options.bias + kTaskShare * (logit - options.bias);
    int begin = 0;
    for (int s = 0; s < options.num_slots; ++s) {
      for (int i = begin; i < out->bag_end[s]; ++i) {
        task_logit += weights[model.weight_begin[s] + out->ranks[i]];
      }
      begin = out->bag_end[s];
    }
    out->task_p[t - 1] = 1.0 / (1.0 + std::exp(-task_logit));
    out->task_labels[t - 1] = rng.Bernoulli(out->task_p[t - 1]) ? 1 : 0;
  }
}

// Appends `row` as one line of text: Criteo TSV (`delimiter` '\t') or the
// csv output (','), whose multi-hot bags are ids separated by '|'.
void AppendLine(const DrawnRow& row, char delimiter, std::string* out) {
  out->push_back(row.label ? '1' : '0');
  for (const uint8_t label : row.task_labels) {
    out->push_back(delimiter);
    out->push_back(label ? '1' : '0');
  }
  for (const int64_t count : row.dense) {
    out->push_back(delimiter);
    if (count >= 0) AppendInt(count, out);
  }
  int begin = 0;
  for (const int end : row.bag_end) {
    out->push_back(delimiter);
    for (int i = begin; i < end; ++i) {
      if (i > begin) out->push_back('|');
      AppendHex8(row.ids[i], out);
    }
    begin = end;
  }
  out->push_back('\n');
}

// The AUC of `scores` against `labels` by the rank-sum formula, ties
// averaged; 0.5 when only one class is present.
double ExactAuc(const std::vector<double>& scores, const std::vector<uint8_t>& labels) {
  std::vector<std::pair<double, uint8_t>> scored(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) scored[i] = {scores[i], labels[i]};
  std::sort(scored.begin(), scored.end());
  double positive_rank_sum = 0.0;
  int64_t positives = 0;
  for (size_t begin = 0; begin < scored.size();) {
    size_t end = begin;
    int64_t group_positives = 0;
    while (end < scored.size() && scored[end].first == scored[begin].first) {
      group_positives += scored[end].second;
      ++end;
    }
    // Ranks begin+1 .. end share their average.
    positive_rank_sum += group_positives * (static_cast<double>(begin + 1 + end) / 2.0);
    positives += group_positives;
    begin = end;
  }
  const int64_t negatives = static_cast<int64_t>(scored.size()) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  const double pos = static_cast<double>(positives);
  return (positive_rank_sum - pos * (pos + 1.0) / 2.0) / (pos * static_cast<double>(negatives));
}

double MeanLogLoss(const std::vector<double>& p, const std::vector<uint8_t>& labels) {
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(p[i], 1e-15, 1.0 - 1e-15);
    sum -= labels[i] ? std::log(q) : std::log1p(-q);
  }
  return sum / static_cast<double>(p.size());
}

// The header line of the csv output.
std::string CsvHeader(const SyntheticOptions& options) {
  std::string header = "label";
  for (int t = 1; t < options.num_tasks; ++t) header += ",label" + std::to_string(t + 1);
  for (int j = 0; j < options.num_dense; ++j) header += ",I" + std::to_string(j + 1);
  for (int s = 0; s < options.num_slots; ++s) header += ",C" + std::to_string(s + 1);
  return header;
}

// Where the rows go: a text file (kCriteo, kCsv), or a columnar file fed with
// the batches that the csv format parses from each chunk's csv text, which
// makes the columnar output exactly what converting the csv output gives.
struct Output {
  std::unique_ptr<AtomicFileWriter> text;
  std::unique_ptr<ColumnarWriter> columnar;
  std::unique_ptr<TextFormat> csv;
  std::unique_ptr<LineParser> parser;
};

Result<Output> OpenOutput(const std::string& path, const SyntheticOptions& options) {
  Output output;
  if (options.format != SyntheticFormat::kColumnar) {
    EMBER_ASSIGN_OR_RETURN(output.text, AtomicFileWriter::Create(path));
    if (options.format == SyntheticFormat::kCsv) {
      EMBER_RETURN_IF_ERROR(output.text->Write(CsvHeader(options) + "\n"));
    }
    return output;
  }
  DelimitedFormatOptions csv;
  EMBER_ASSIGN_OR_RETURN(csv.schema, ParseSchemaSpec(SyntheticCsvSchema(options)));
  csv.header = true;
  csv.slot_bits = options.slot_bits;
  EMBER_ASSIGN_OR_RETURN(output.csv, NewDelimitedFormat(csv));
  EMBER_ASSIGN_OR_RETURN(output.parser, output.csv->NewLineParser(CsvHeader(options)));
  ColumnarShape shape;
  shape.num_labels = options.num_tasks;
  shape.num_dense = options.num_dense;
  shape.num_slots = options.num_slots;
  shape.slot_bits = options.slot_bits;
  EMBER_ASSIGN_OR_RETURN(output.columnar, ColumnarWriter::Open(path, shape));
  return output;
}

// Draws all rows in parallel chunks and writes them in row order, holding at
// most one wave of chunks (text, and for columnar output their batches) at a
// time. Fills p and labels per row and task: [rows x num_tasks].
Status WriteRows(const SyntheticOptions& options, const PlantedModel& model, Output* output,
                 const std::function<void(int64_t)>& progress, std::vector<double>* p,
                 std::vector<uint8_t>* labels, std::vector<double>* blind_p) {
  const int64_t chunks = (options.rows + kChunkRows - 1) / kChunkRows;
  const int64_t wave_chunks = std::max(2, 2 * HardwareThreads());
  const char delimiter = options.format == SyntheticFormat::kCriteo ? '\t' : ',';
  std::vector<std::string> texts(wave_chunks);
  std::vector<ParsedLines> parsed(output->parser ? wave_chunks : 0);
  int64_t next_progress = kProgressEveryRows;
  for (int64_t wave_begin = 0; wave_begin < chunks; wave_begin += wave_chunks) {
    const int64_t wave_end = std::min(chunks, wave_begin + wave_chunks);
    ParallelFor(wave_begin, wave_end, 1, [&](int64_t begin, int64_t end) {
      DrawnRow drawn;
      for (int64_t chunk = begin; chunk < end; ++chunk) {
        std::string& text = texts[chunk - wave_begin];
        text.clear();
        const int64_t row_end = std::min(options.rows, (chunk + 1) * kChunkRows);
        for (int64_t row = chunk * kChunkRows; row < row_end; ++row) {
          DrawRow(options, model, row, &drawn);
          AppendLine(drawn, delimiter, &text);
          const int tasks = options.num_tasks;
          (*p)[row * tasks] = drawn.p;
          (*labels)[row * tasks] = drawn.label ? 1 : 0;
          if (!blind_p->empty()) (*blind_p)[row] = drawn.blind_p;
          for (int t = 1; t < tasks; ++t) {
            (*p)[row * tasks + t] = drawn.task_p[t - 1];
            (*labels)[row * tasks + t] = drawn.task_labels[t - 1];
          }
        }
        if (output->parser) {
          ParseLines(text, *output->parser, output->csv->layout(), /*stop_at_bad_line=*/true,
                     &parsed[chunk - wave_begin]);
        }
      }
    });
    for (int64_t chunk = wave_begin; chunk < wave_end; ++chunk) {
      if (output->parser) {
        const ParsedLines& lines = parsed[chunk - wave_begin];
        if (lines.bad_lines > 0) {
          return Status::Internal("generated row ", chunk * kChunkRows + lines.lines - 1,
                                  " does not parse as csv: ",
                                  BadLineReasonName(lines.examples.front().reason));
        }
        EMBER_RETURN_IF_ERROR(output->columnar->Append(lines.rows));
      } else {
        EMBER_RETURN_IF_ERROR(output->text->Write(texts[chunk - wave_begin]));
      }
      const int64_t rows_done = std::min(options.rows, (chunk + 1) * kChunkRows);
      if (progress && rows_done >= next_progress) {
        progress(rows_done);
        next_progress = (rows_done / kProgressEveryRows + 1) * kProgressEveryRows;
      }
    }
  }
  if (progress) progress(options.rows);
  return Status::OK();
}

// The flags of `ember train` / `ember convert` that read the output.
std::string ReadFlags(const SyntheticOptions& options) {
  switch (options.format) {
    case SyntheticFormat::kCriteo:
      return "--format=criteo";
    case SyntheticFormat::kCsv:
      return "--format=csv --header --schema=" + SyntheticCsvSchema(options);
    case SyntheticFormat::kColumnar:
      return "--format=columnar";
  }
  return "";
}

constexpr const char* kFormatNames[] = {"criteo_tsv", "csv", "columnar"};

// The meta file beside generated data: how to read it, the options that
// generated it (less the format) and what is known about it.
struct SyntheticMeta {
  std::string format;
  std::string read_flags;
  std::string generator = "ember synthetic v1";
  SyntheticOptions options;
  SyntheticInfo info;
};

}  // namespace

void to_json(Json& j, const SyntheticOptions& o) {
  j = Json{{"rows", o.rows},
           {"seed", o.seed},
           {"num_dense", o.num_dense},
           {"num_slots", o.num_slots},
           {"vocabulary", o.vocabulary}};
  if (o.num_clusters > 1) {
    j["num_clusters"] = o.num_clusters;
    j["cluster_units"] = o.cluster_units;
    j["cluster_scale"] = o.cluster_scale;
  }
  if (!o.slot_vocabularies.empty()) j["slot_vocabularies"] = o.slot_vocabularies;
  j["zipf_exponent"] = o.zipf_exponent;
  j["id_weight_scale"] = o.id_weight_scale;
  j["latent_rank"] = o.latent_rank;
  j["interacting_slots"] = o.interacting_slots;
  j["interaction_scale"] = o.interaction_scale;
  j["bias"] = o.bias;
  j["multi_hot_slots"] = o.multi_hot_slots;
  j["max_bag_size"] = o.max_bag_size;
  j["num_tasks"] = o.num_tasks;
  j["slot_bits"] = o.slot_bits;
}

// The fields of the first version are required; the others (added since,
// or written only for clusters and per-slot vocabularies) keep their
// defaults when absent. The format is the meta file's, not an option's.
void from_json(const Json& j, SyntheticOptions& o) {
  JsonFields f(j);
  f.Get("rows", &o.rows);
  f.Get("seed", &o.seed);
  f.Get("num_dense", &o.num_dense);
  f.Get("num_slots", &o.num_slots);
  f.Get("vocabulary", &o.vocabulary);
  f.Optional("num_clusters", &o.num_clusters);
  f.Optional("cluster_units", &o.cluster_units);
  f.Optional("cluster_scale", &o.cluster_scale);
  f.Optional("slot_vocabularies", &o.slot_vocabularies);
  f.Get("zipf_exponent", &o.zipf_exponent);
  f.Get("id_weight_scale", &o.id_weight_scale);
  f.Get("latent_rank", &o.latent_rank);
  f.Get("interacting_slots", &o.interacting_slots);
  f.Get("interaction_scale", &o.interaction_scale);
  f.Get("bias", &o.bias);
  f.Optional("multi_hot_slots", &o.multi_hot_slots);
  f.Optional("max_bag_size", &o.max_bag_size);
  f.Optional("num_tasks", &o.num_tasks);
  f.Optional("slot_bits", &o.slot_bits);
  f.Done();
}

void to_json(Json& j, const SyntheticInfo& info) {
  j = Json{{"rows", info.rows},
           {"positive_rate", info.positive_rate},
           {"bayes_auc", info.bayes_auc},
           {"bayes_logloss", info.bayes_logloss}};
  // Known (and written) for data generated with clusters only.
  if (info.cluster_blind_auc > 0) j["cluster_blind_auc"] = info.cluster_blind_auc;
  j["task_bayes_auc"] = info.task_bayes_auc;
}

void from_json(const Json& j, SyntheticInfo& info) {
  JsonFields f(j);
  f.Get("rows", &info.rows);
  f.Get("positive_rate", &info.positive_rate);
  f.Get("bayes_auc", &info.bayes_auc);
  f.Get("bayes_logloss", &info.bayes_logloss);
  f.Optional("cluster_blind_auc", &info.cluster_blind_auc);
  f.Optional("task_bayes_auc", &info.task_bayes_auc);  // one task before there were more
  f.Done();
}

namespace {

void to_json(Json& j, const SyntheticMeta& meta) {
  j = Json{{"format", meta.format},
           {"read_flags", meta.read_flags},
           {"generator", meta.generator},
           {"options", meta.options},
           {"info", meta.info}};
}

void from_json(const Json& j, SyntheticMeta& meta) {
  JsonFields f(j);
  f.Get("format", &meta.format);
  f.Optional("read_flags", &meta.read_flags);
  f.Get("generator", &meta.generator);
  f.Get("options", &meta.options);
  f.Get("info", &meta.info);
  f.Done();
}

std::string MetaJson(const SyntheticOptions& options, const SyntheticInfo& info) {
  SyntheticMeta meta;
  meta.format = kFormatNames[static_cast<int>(options.format)];
  meta.read_flags = ReadFlags(options);
  meta.options = options;
  meta.info = info;
  return JsonText(Json(meta), 2) + "\n";
}

// The meta file of the data at `data_path`.
Result<SyntheticMeta> ReadSyntheticMeta(const std::string& data_path) {
  const std::string meta_path = data_path + ".meta.json";
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(meta_path));
  return FromJsonText<SyntheticMeta>(text, meta_path);
}

}  // namespace

Result<SyntheticFormat> ParseSyntheticFormat(const std::string& name) {
  if (name == "criteo") return SyntheticFormat::kCriteo;
  if (name == "csv") return SyntheticFormat::kCsv;
  if (name == "columnar") return SyntheticFormat::kColumnar;
  return Status::InvalidArgument("unknown output format \"", name,
                                 "\" (expected criteo, csv or columnar)");
}

const char* SyntheticFormatName(SyntheticFormat format) {
  switch (format) {
    case SyntheticFormat::kCriteo:
      return "criteo";
    case SyntheticFormat::kCsv:
      return "csv";
    case SyntheticFormat::kColumnar:
      return "columnar";
  }
  return "unknown";
}

std::string SyntheticCsvSchema(const SyntheticOptions& options) {
  // One entry for `count` columns from `first`: an index or a range.
  const auto columns = [](int first, int count, const char* role) {
    const std::string ref = count == 1 ? std::to_string(first)
                                       : std::to_string(first) + "-" +
                                             std::to_string(first + count - 1);
    return "," + ref + "=" + role;
  };
  std::string schema =
      options.num_tasks == 1 ? "label" : "0-" + std::to_string(options.num_tasks - 1) + "=label";
  int column = options.num_tasks;
  const int single = options.num_slots - options.multi_hot_slots;
  for (const auto& [count, role] : {std::pair{options.num_dense, "dense"},
                                    std::pair{single, "cat"},
                                    std::pair{options.multi_hot_slots, "multi"}}) {
    if (count == 0) continue;
    schema += columns(column, count, role);
    column += count;
  }
  return schema;
}

Status ValidateSyntheticOptions(const SyntheticOptions& o) {
  if (o.rows < 1) return Status::InvalidArgument("rows must be >= 1, got ", o.rows);
  if (o.num_dense < 0 || o.num_dense > 64) {
    return Status::InvalidArgument("num_dense must be in [0, 64], got ", o.num_dense);
  }
  if (o.num_slots < 1 || o.num_slots > 1023) {
    return Status::InvalidArgument("num_slots must be in [1, 1023], got ", o.num_slots);
  }
  if (o.num_clusters < 1 || o.num_clusters > kMaxClusters) {
    return Status::InvalidArgument("num_clusters must be in [1, ", kMaxClusters, "], got ",
                                   o.num_clusters);
  }
  if (o.num_clusters > 1 && ClusterBits(o.num_clusters) > o.num_dense) {
    return Status::InvalidArgument(
        "num_clusters=", o.num_clusters, " needs at least ", ClusterBits(o.num_clusters),
        " dense features (they place a row in its cluster), got ", "num_dense=", o.num_dense);
  }
  if (o.cluster_units < 1 || o.cluster_units > kMaxClusterUnits) {
    return Status::InvalidArgument("cluster_units must be in [1, ", kMaxClusterUnits, "], got ",
                                   o.cluster_units);
  }
  if (!(o.cluster_scale >= 0.0) || !std::isfinite(o.cluster_scale)) {
    return Status::InvalidArgument("cluster_scale must be finite and >= 0, got ", o.cluster_scale);
  }
  if (o.vocabulary < 1 || o.vocabulary > kMaxVocabulary) {
    return Status::InvalidArgument("vocabulary must be in [1, 2^32], got ", o.vocabulary);
  }
  if (!o.slot_vocabularies.empty()) {
    if (static_cast<int>(o.slot_vocabularies.size()) != o.num_slots) {
      return Status::InvalidArgument("slot_vocabularies has ", o.slot_vocabularies.size(),
                                     " values for num_slots=", o.num_slots);
    }
    for (const int64_t v : o.slot_vocabularies) {
      if (v < 1 || v > kMaxVocabulary) {
        return Status::InvalidArgument("slot_vocabularies: each vocabulary must be in [1, 2^32], ",
                                       "got ", v);
      }
    }
  }
  if (!(o.zipf_exponent > 0.0) || !std::isfinite(o.zipf_exponent)) {
    return Status::InvalidArgument("zipf_exponent must be > 0, got ", o.zipf_exponent);
  }
  if (!(o.id_weight_scale >= 0.0) || !std::isfinite(o.id_weight_scale)) {
    return Status::InvalidArgument("id_weight_scale must be >= 0, got ", o.id_weight_scale);
  }
  if (o.latent_rank < 0 || o.latent_rank > 256) {
    return Status::InvalidArgument("latent_rank must be in [0, 256], got ", o.latent_rank);
  }
  if (o.interacting_slots < 0 || o.interacting_slots > o.num_slots) {
    return Status::InvalidArgument("interacting_slots must be in [0, num_slots=", o.num_slots,
                                   "], got ", o.interacting_slots);
  }
  if (!(o.interaction_scale >= 0.0) || !std::isfinite(o.interaction_scale)) {
    return Status::InvalidArgument("interaction_scale must be >= 0, got ", o.interaction_scale);
  }
  if (!std::isfinite(o.bias)) return Status::InvalidArgument("bias must be finite");
  if (o.num_tasks < 1 || o.num_tasks > kMaxTasks) {
    return Status::InvalidArgument("num_tasks must be in [1, ", kMaxTasks, "], got ",
                                   o.num_tasks);
  }
  if (o.format == SyntheticFormat::kCriteo && o.num_tasks != 1) {
    return Status::InvalidArgument("the criteo format holds one label (got num_tasks=",
                                   o.num_tasks, "); write csv or columnar");
  }
  if (o.multi_hot_slots < 0 || o.multi_hot_slots > o.num_slots) {
    return Status::InvalidArgument("multi_hot_slots must be in [0, num_slots=", o.num_slots,
                                   "], got ", o.multi_hot_slots);
  }
  if (o.max_bag_size < 1 || o.max_bag_size > kMaxBagSize) {
    return Status::InvalidArgument("max_bag_size must be in [1, ", kMaxBagSize, "], got ",
                                   o.max_bag_size);
  }
  if (o.slot_bits < 1 || o.slot_bits > 32 || o.num_slots > (int64_t{1} << o.slot_bits)) {
    return Status::InvalidArgument("slot_bits must be in [1, 32] and leave room for num_slots=",
                                   o.num_slots, ", got ", o.slot_bits);
  }
  if (o.format == SyntheticFormat::kCriteo &&
      (o.num_dense != 13 || o.num_slots != 26 || o.multi_hot_slots != 0)) {
    return Status::InvalidArgument(
        "the criteo format holds 13 dense and 26 "
        "single-valued slots (got num_dense=",
        o.num_dense, ", num_slots=", o.num_slots, ", multi_hot_slots=", o.multi_hot_slots,
        "); write csv or columnar");
  }
  double model_bytes = 0.0;
  const std::vector<int64_t> vocabularies = SlotVocabularies(o);
  for (int s = 0; s < o.num_slots; ++s) {
    const double floats = o.num_tasks + (s < o.interacting_slots ? o.latent_rank : 0);
    model_bytes += static_cast<double>(vocabularies[s]) * (sizeof(double) + sizeof(float) * floats);
  }
  if (o.num_clusters > 1) {
    const double pairs = 0.5 * o.interacting_slots * (o.interacting_slots - 1);
    model_bytes += sizeof(double) * o.num_clusters * o.cluster_units * (pairs + 2.0);
  }
  if (model_bytes > static_cast<double>(kMaxModelBytes)) {
    return Status::InvalidArgument("the planted model would need ", model_bytes / (1 << 20),
                                   " MiB (vocabulary x slots too large; limit ",
                                   kMaxModelBytes >> 20, " MiB)");
  }
  return Status::OK();
}

Result<SyntheticInfo> WriteSynthetic(const std::string& path, const SyntheticOptions& options,
                                     const std::function<void(int64_t)>& progress) {
  EMBER_RETURN_IF_ERROR(ValidateSyntheticOptions(options));
  const PlantedModel model = BuildModel(options);
  const int tasks = options.num_tasks;
  std::vector<double> p(options.rows * tasks);
  std::vector<uint8_t> labels(options.rows * tasks);
  EMBER_ASSIGN_OR_RETURN(Output output, OpenOutput(path, options));
  std::vector<double> blind_p(options.num_clusters > 1 ? options.rows : 0);
  EMBER_RETURN_IF_ERROR(WriteRows(options, model, &output, progress, &p, &labels, &blind_p));
  EMBER_RETURN_IF_ERROR(output.text ? output.text->Commit() : output.columnar->Finish());

  SyntheticInfo info;
  info.rows = options.rows;
  std::vector<double> task_p(options.rows);
  std::vector<uint8_t> task_labels(options.rows);
  for (int t = 0; t < tasks; ++t) {
    for (int64_t row = 0; row < options.rows; ++row) {
      task_p[row] = p[row * tasks + t];
      task_labels[row] = labels[row * tasks + t];
    }
    info.task_bayes_auc.push_back(ExactAuc(task_p, task_labels));
    if (t > 0) continue;
    int64_t positives = 0;
    for (const uint8_t label : task_labels) positives += label;
    info.positive_rate = static_cast<double>(positives) / static_cast<double>(options.rows);
    info.bayes_auc = info.task_bayes_auc[0];
    info.bayes_logloss = MeanLogLoss(task_p, task_labels);
    if (!blind_p.empty()) info.cluster_blind_auc = ExactAuc(blind_p, task_labels);
  }
  EMBER_RETURN_IF_ERROR(WriteFileAtomic(path + ".meta.json", MetaJson(options, info)));
  return info;
}

Result<SyntheticInfo> WriteSyntheticCriteo(const std::string& path, const SyntheticOptions& options,
                                           const std::function<void(int64_t)>& progress) {
  SyntheticOptions criteo = options;
  criteo.format = SyntheticFormat::kCriteo;
  return WriteSynthetic(path, criteo, progress);
}

Result<double> ReadSyntheticBayesAuc(const std::string& data_path) {
  EMBER_ASSIGN_OR_RETURN(const SyntheticMeta meta, ReadSyntheticMeta(data_path));
  return meta.info.bayes_auc;
}

Result<std::vector<double>> ReadSyntheticTaskBayesAuc(const std::string& data_path) {
  EMBER_ASSIGN_OR_RETURN(const SyntheticMeta meta, ReadSyntheticMeta(data_path));
  if (meta.info.task_bayes_auc.empty()) return std::vector<double>{meta.info.bayes_auc};
  return meta.info.task_bayes_auc;
}

}  // namespace ember::io
