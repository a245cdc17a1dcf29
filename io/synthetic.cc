#include "io/synthetic.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include "core/file.h"
#include "core/json.h"
#include "core/random.h"
#include "core/threads.h"
#include "io/feature_hash.h"

namespace ember::io {
namespace {

constexpr int64_t kChunkRows = 8192;
constexpr int64_t kProgressEveryRows = 100000;
constexpr double kDenseMissingRate = 0.1;
constexpr double kDenseWeightScale = 0.15;
// Samples used to estimate each dense feature's mean log count.
constexpr int kDenseCenterSamples = 4096;
// Largest vocabulary: ids are written as distinct 32-bit hex strings.
constexpr int64_t kMaxVocabulary = int64_t{1} << 32;
// Bound on the planted model's tables (weights, latents, Zipf CDF).
constexpr int64_t kMaxModelBytes = int64_t{2} << 30;

// Tags that keep the random streams of the model apart from the rows'.
constexpr uint64_t kIdWeightTag = 0x1d3f5a7c9e0b2d4fULL;
constexpr uint64_t kLatentTag = 0x2e4c6a8b0d1f3e5aULL;
constexpr uint64_t kDenseTag = 0x3f5d7b9a1c2e4f60ULL;
constexpr uint64_t kDenseCenterTag = 0x4a6c8e0f2b3d5f71ULL;

// The planted model that every row is drawn from. Each id's parameters are a
// function of (seed, slot, id) alone.
struct PlantedModel {
  int64_t vocabulary = 0;
  int rank = 0;
  int interacting_slots = 0;
  std::vector<double> zipf_cdf;      // [vocabulary]: P(id <= i)
  std::vector<float> id_weights;     // [num_slots x vocabulary]
  std::vector<float> latents;        // [interacting_slots x vocabulary x rank]
  std::vector<double> dense_mu;      // [num_dense]: mean of log(1 + count)
  std::vector<double> dense_weight;  // [num_dense]
  std::vector<double> dense_center;  // [num_dense]: E[LogTransform(value)]
};

// Feature j's count: floor(exp(N(mu, 1))) - 1, at least 0.
int64_t DenseCount(double mu, double normal) {
  const double count = std::floor(std::exp(std::min(mu + normal, 40.0))) - 1.0;
  return count > 0.0 ? static_cast<int64_t>(count) : 0;
}

void BuildDenseModel(const SyntheticOptions& options, PlantedModel* model) {
  for (int j = 0; j < options.num_dense; ++j) {
    RandomStream rng(HashCombine(options.seed, kDenseTag), j);
    const double mu = rng.Uniform(-0.5, 4.0);
    model->dense_mu.push_back(mu);
    model->dense_weight.push_back(kDenseWeightScale * rng.Normal());
    // Centring keeps the dense term's mean near 0, so the click rate is set
    // by `bias` whatever the seed; a constant is still learnable as bias.
    RandomStream sampler(HashCombine(options.seed, kDenseCenterTag), j);
    double sum = 0.0;
    for (int i = 0; i < kDenseCenterSamples; ++i) {
      sum += LogTransform(static_cast<double>(DenseCount(mu, sampler.Normal())));
    }
    model->dense_center.push_back((1.0 - kDenseMissingRate) * sum / kDenseCenterSamples);
  }
}

// Shifts each slot's weights so that their mean under the Zipf distribution
// is 0: the click rate is then set by `bias` rather than by which ids the
// seed happened to make heavy. A per-slot constant is learnable as bias.
void CenterIdWeights(PlantedModel* model) {
  const int64_t vocab = model->vocabulary;
  const int64_t slots = static_cast<int64_t>(model->id_weights.size()) / vocab;
  for (int64_t slot = 0; slot < slots; ++slot) {
    float* weights = model->id_weights.data() + slot * vocab;
    double mean = 0.0;
    double previous_cdf = 0.0;
    for (int64_t id = 0; id < vocab; ++id) {
      mean += (model->zipf_cdf[id] - previous_cdf) * weights[id];
      previous_cdf = model->zipf_cdf[id];
    }
    for (int64_t id = 0; id < vocab; ++id) weights[id] -= static_cast<float>(mean);
  }
}

PlantedModel BuildModel(const SyntheticOptions& options) {
  PlantedModel model;
  const int64_t vocab = options.vocabulary;
  model.vocabulary = vocab;
  model.rank = options.latent_rank;
  model.interacting_slots = options.interacting_slots;
  // Zipf: P(id = i) proportional to (i + 1)^-s; id 0 is the most frequent.
  model.zipf_cdf.resize(vocab);
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    total += std::pow(static_cast<double>(i + 1), -options.zipf_exponent);
    model.zipf_cdf[i] = total;
  }
  for (double& c : model.zipf_cdf) c /= total;
  model.zipf_cdf.back() = 1.0;

  model.id_weights.resize(options.num_slots * vocab);
  model.latents.resize(int64_t{options.interacting_slots} * vocab * options.latent_rank);
  ParallelFor(0, options.num_slots, 1, [&](int64_t begin, int64_t end) {
    for (int64_t slot = begin; slot < end; ++slot) {
      const uint64_t weight_seed = HashCombine(HashCombine(options.seed, kIdWeightTag), slot);
      const uint64_t latent_seed = HashCombine(HashCombine(options.seed, kLatentTag), slot);
      for (int64_t id = 0; id < vocab; ++id) {
        RandomStream weight(weight_seed, id);
        model.id_weights[slot * vocab + id] =
            static_cast<float>(options.id_weight_scale * weight.Normal());
        if (slot >= options.interacting_slots) continue;
        RandomStream latent(latent_seed, id);
        float* vec = model.latents.data() + (slot * vocab + id) * options.latent_rank;
        for (int k = 0; k < options.latent_rank; ++k) {
          vec[k] = static_cast<float>(options.interaction_scale * latent.Normal());
        }
      }
    }
  });
  CenterIdWeights(&model);
  BuildDenseModel(options, &model);
  return model;
}

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

// Draws row `row` from RandomStream(seed, row), appends its TSV line to `out`
// and returns its true click probability and label.
std::pair<double, bool> DrawRow(const SyntheticOptions& options, const PlantedModel& model,
                                int64_t row, std::vector<int64_t>* ids, std::string* out) {
  RandomStream rng(options.seed, row);
  const size_t label_pos = out->size();
  out->push_back('0');
  double logit = options.bias;
  for (int j = 0; j < options.num_dense; ++j) {
    const bool missing = rng.Bernoulli(kDenseMissingRate);
    const int64_t count = DenseCount(model.dense_mu[j], rng.Normal());
    out->push_back('\t');
    const double value = missing ? 0.0 : LogTransform(static_cast<double>(count));
    logit += model.dense_weight[j] * (value - model.dense_center[j]);
    if (!missing) AppendInt(count, out);
  }
  for (int s = 0; s < options.num_slots; ++s) {
    const double u = rng.NextDouble();
    const int64_t id = std::min<int64_t>(
        std::upper_bound(model.zipf_cdf.begin(), model.zipf_cdf.end(), u) - model.zipf_cdf.begin(),
        model.vocabulary - 1);
    (*ids)[s] = id;
    logit += model.id_weights[s * model.vocabulary + id];
    out->push_back('\t');
    AppendHex8(ScrambleId(s, id), out);
  }
  for (int a = 0; a < model.interacting_slots; ++a) {
    const float* va = model.latents.data() + (a * model.vocabulary + (*ids)[a]) * model.rank;
    for (int b = a + 1; b < model.interacting_slots; ++b) {
      const float* vb = model.latents.data() + (b * model.vocabulary + (*ids)[b]) * model.rank;
      for (int k = 0; k < model.rank; ++k) logit += double{va[k]} * vb[k];
    }
  }
  const double p = 1.0 / (1.0 + std::exp(-logit));
  const bool label = rng.Bernoulli(p);
  (*out)[label_pos] = label ? '1' : '0';
  out->push_back('\n');
  return {p, label};
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

// Draws all rows in parallel chunks and writes them in row order, holding at
// most one wave of chunks' text at a time. Fills p and labels per row.
Status WriteRows(const SyntheticOptions& options, const PlantedModel& model, AtomicFileWriter* file,
                 const std::function<void(int64_t)>& progress, std::vector<double>* p,
                 std::vector<uint8_t>* labels) {
  const int64_t chunks = (options.rows + kChunkRows - 1) / kChunkRows;
  const int64_t wave_chunks = std::max(2, 2 * HardwareThreads());
  std::vector<std::string> texts(wave_chunks);
  int64_t next_progress = kProgressEveryRows;
  for (int64_t wave_begin = 0; wave_begin < chunks; wave_begin += wave_chunks) {
    const int64_t wave_end = std::min(chunks, wave_begin + wave_chunks);
    ParallelFor(wave_begin, wave_end, 1, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> ids(options.num_slots);
      for (int64_t chunk = begin; chunk < end; ++chunk) {
        std::string& text = texts[chunk - wave_begin];
        text.clear();
        const int64_t row_end = std::min(options.rows, (chunk + 1) * kChunkRows);
        for (int64_t row = chunk * kChunkRows; row < row_end; ++row) {
          const auto [prob, label] = DrawRow(options, model, row, &ids, &text);
          (*p)[row] = prob;
          (*labels)[row] = label ? 1 : 0;
        }
      }
    });
    for (int64_t chunk = wave_begin; chunk < wave_end; ++chunk) {
      EMBER_RETURN_IF_ERROR(file->Write(texts[chunk - wave_begin]));
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

std::string MetaJson(const SyntheticOptions& options, const SyntheticInfo& info) {
  JsonObject opts;
  opts.Add("rows", options.rows)
      .AddRaw("seed", std::to_string(options.seed))
      .Add("num_dense", options.num_dense)
      .Add("num_slots", options.num_slots)
      .Add("vocabulary", options.vocabulary)
      .Add("zipf_exponent", options.zipf_exponent)
      .Add("id_weight_scale", options.id_weight_scale)
      .Add("latent_rank", options.latent_rank)
      .Add("interacting_slots", options.interacting_slots)
      .Add("interaction_scale", options.interaction_scale)
      .Add("bias", options.bias);
  JsonObject facts;
  facts.Add("rows", info.rows)
      .Add("positive_rate", info.positive_rate)
      .Add("bayes_auc", info.bayes_auc)
      .Add("bayes_logloss", info.bayes_logloss);
  JsonObject meta;
  meta.Add("format", "criteo_tsv").Add("generator", "ember synthetic v1");
  meta.Add("options", opts).Add("info", facts);
  return meta.ToString();
}

}  // namespace

Status ValidateSyntheticOptions(const SyntheticOptions& o) {
  if (o.rows < 1) return Status::InvalidArgument("rows must be >= 1, got ", o.rows);
  if (o.num_dense < 0 || o.num_dense > 64) {
    return Status::InvalidArgument("num_dense must be in [0, 64], got ", o.num_dense);
  }
  if (o.num_slots < 1 || o.num_slots > 1023) {
    return Status::InvalidArgument("num_slots must be in [1, 1023], got ", o.num_slots);
  }
  if (o.vocabulary < 1 || o.vocabulary > kMaxVocabulary) {
    return Status::InvalidArgument("vocabulary must be in [1, 2^32], got ", o.vocabulary);
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
  const double model_bytes =
      static_cast<double>(o.vocabulary) *
      (sizeof(double) +
       sizeof(float) * (o.num_slots + static_cast<double>(o.interacting_slots) * o.latent_rank));
  if (model_bytes > static_cast<double>(kMaxModelBytes)) {
    return Status::InvalidArgument("the planted model would need ", model_bytes / (1 << 20),
                                   " MiB (vocabulary x slots too large; limit ",
                                   kMaxModelBytes >> 20, " MiB)");
  }
  return Status::OK();
}

Result<SyntheticInfo> WriteSyntheticCriteo(const std::string& path, const SyntheticOptions& options,
                                           const std::function<void(int64_t)>& progress) {
  EMBER_RETURN_IF_ERROR(ValidateSyntheticOptions(options));
  const PlantedModel model = BuildModel(options);
  std::vector<double> p(options.rows);
  std::vector<uint8_t> labels(options.rows);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Create(path));
  EMBER_RETURN_IF_ERROR(WriteRows(options, model, file.get(), progress, &p, &labels));
  EMBER_RETURN_IF_ERROR(file->Commit());

  SyntheticInfo info;
  info.rows = options.rows;
  int64_t positives = 0;
  for (const uint8_t label : labels) positives += label;
  info.positive_rate = static_cast<double>(positives) / static_cast<double>(options.rows);
  info.bayes_auc = ExactAuc(p, labels);
  info.bayes_logloss = MeanLogLoss(p, labels);
  EMBER_RETURN_IF_ERROR(WriteFileAtomic(path + ".meta.json", MetaJson(options, info)));
  return info;
}

Result<double> ReadSyntheticBayesAuc(const std::string& data_path) {
  const std::string meta_path = data_path + ".meta.json";
  EMBER_ASSIGN_OR_RETURN(const std::string meta, ReadFile(meta_path));
  const std::string key = "\"bayes_auc\"";
  size_t pos = meta.find(key);
  if (pos == std::string::npos) {
    return Status::InvalidArgument(meta_path, ": has no \"bayes_auc\" field");
  }
  pos = meta.find_first_not_of(" \t\r\n", pos + key.size());
  if (pos != std::string::npos && meta[pos] == ':') {
    pos = meta.find_first_not_of(" \t\r\n", pos + 1);
  }
  double auc = 0.0;
  if (pos != std::string::npos) {
    const auto result = std::from_chars(meta.data() + pos, meta.data() + meta.size(), auc);
    if (result.ec == std::errc()) return auc;
  }
  return Status::InvalidArgument(meta_path, ": \"bayes_auc\" is not a number");
}

}  // namespace ember::io
