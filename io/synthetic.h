#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/feature_hash.h"

namespace ember::io {

// How WriteSynthetic writes the rows.
enum class SyntheticFormat {
  // Criteo TSV (criteo.h): label, 13 integer and 26 hex categorical columns.
  // Needs num_dense = 13, num_slots = 26 and no multi-hot slots.
  kCriteo,
  // Comma-separated text with a header line "label,I1,..,In,C1,..,Cm" and
  // multi-hot fields as ids separated by '|'; read it with the csv format
  // and the schema of SyntheticCsvSchema() (also in the .meta.json).
  kCsv,
  // Ember's columnar format (columnar.h): the rows the csv format reads
  // from the csv output (identical batches), written without the text.
  kColumnar,
};

// "criteo", "csv" or "columnar"; InvalidArgument for anything else.
Result<SyntheticFormat> ParseSyntheticFormat(const std::string& name);
const char* SyntheticFormatName(SyntheticFormat format);

// A planted logistic model over CTR-shaped features (Criteo's shape by
// default). Each slot's ids are Zipf-distributed over the slot's vocabulary;
// each id carries a weight and a latent vector; dense features are counts
// whose log1p carries a weight; the label is Bernoulli(sigmoid(bias + dense
// term + id weights + pairwise latent interactions between slots)). A model
// that learns the planted function reaches the Bayes AUC, which is computed
// from the true probabilities.
//
// Details: id weights ~ N(0, id_weight_scale) are shifted per slot so that
// their Zipf-weighted mean is 0, and the dense term is w_j * (LogTransform(x_j)
// - E[LogTransform(x_j)]) with w_j ~ N(0, 0.15); both shifts are constants a
// model absorbs in its bias, and they keep the click rate set by `bias`
// whatever the seed. Dense count j is floor(exp(N(mu_j, 1))) - 1 (at least 0)
// with mu_j ~ U(-0.5, 4); 10% of dense values are missing (written empty,
// LogTransform 0). With the defaults: click rate about 0.27, Bayes AUC about
// 0.82. The defaults are chosen so that one epoch of DLRM at its Criteo sizes
// comes within about 0.02 AUC of that ceiling (a smaller vocabulary or more
// rows make the id weights easier to learn; weaker interactions, too).
//
// Multi-hot slots are the last `multi_hot_slots` slots: each row holds a bag
// of 0 to max_bag_size ids there (size uniform, ids drawn independently from
// the slot's Zipf distribution, repeats possible), and the bag adds the sum
// of its ids' weights (and of their latent vectors, for an interacting
// slot), as the sum pooling of the models does. An empty bag adds nothing.
struct SyntheticOptions {
  int64_t rows = 1000000;
  uint64_t seed = 1;
  int num_dense = 13;
  int num_slots = 26;
  // Distinct ids per slot, for every slot unless slot_vocabularies is set.
  int64_t vocabulary = 200;
  // Distinct ids of each slot (num_slots values); empty: `vocabulary` each.
  std::vector<int64_t> slot_vocabularies;
  // Zipf exponent of the id distribution in each slot.
  double zipf_exponent = 1.05;
  // Standard deviation of each id's weight.
  double id_weight_scale = 0.3;
  // Rank and scale of the latent vectors whose dot products add pairwise
  // interactions between the first `interacting_slots` slots.
  int latent_rank = 4;
  int interacting_slots = 6;
  double interaction_scale = 0.15;
  // Intercept of the logit; sets the click rate (about 25% by default).
  double bias = -1.45;
  // The last `multi_hot_slots` slots hold bags of 0 to max_bag_size ids.
  int multi_hot_slots = 0;
  // Labels per row (tasks, e.g. click and conversion). Task 0 is the click
  // model above; task t > 0 has logit bias + 0.7 x (click logit - bias) + its
  // own id weights ~ N(0, 0.7 x id_weight_scale) (centred like the click
  // ones), so the tasks share most of their signal and differ in part, as
  // multi-task models (MMoE) assume. Its labels are drawn after the click
  // label, so task 0's rows do not depend on num_tasks. More than one task
  // needs the csv or columnar format.
  int num_tasks = 1;
  int max_bag_size = 4;
  // Hidden clusters, each with its own planted function: the data a mixture
  // of experts is for. 1 (default): the model above, rows unchanged. At most
  // 16; needs num_dense >= b = ceil(log2(num_clusters)).
  // - Where a row's cluster comes from: dense features 0 .. b-1 are never
  //   missing and their normal draw z becomes 0.5 z -/+ 1.5 by the sign of z
  //   (two modes of the log count, a gap of about 3 between them, distinct
  //   counts for any mu); bit i of the cluster is feature i's upper mode, and
  //   the cluster is those bits modulo num_clusters. It is thus a function
  //   of the features (not given as a label), which a model must learn to
  //   read. The other features draw as without clusters.
  // - What differs between the clusters: the click logit above (bias, dense,
  //   id weights and the pairwise latent interactions, all shared) gains
  //   t_c(x), cluster c's own "teacher" network: one hidden layer of
  //   cluster_units ReLU units over x, the P = interacting_slots choose 2
  //   pair products <v_a, v_b> divided by their spread (interaction_scale^2
  //   * sqrt(latent_rank)),
  //     t_c(x) = sum_h a_ch relu(u_ch . x + b_ch) + o_c,
  //   u_ch ~ N(0, I / P), b_ch ~ U(-1, 1), a_ch ~ N(0, 1), drawn per
  //   cluster, then a_ch and the offset o_c set so that t_c has mean 0 and
  //   standard deviation cluster_scale (on Gaussian latents). A model that
  //   reads the cluster and fits cluster_units units per cluster reaches
  //   bayes_auc: one expert per cluster, if an expert is that wide. A dense
  //   MLP must hold num_clusters x cluster_units units to do the same, and
  //   one of the FLOPs of a top-1 or top-2 mixture cannot. A model blind to
  //   the cluster gets about cluster_blind_auc of SyntheticInfo (the AUC with
  //   t_c replaced by its mean over the clusters).
  int num_clusters = 1;
  // Width of each cluster's teacher, in [1, 1024], and the standard deviation
  // of its output, in logits (>= 0). Used only with num_clusters > 1.
  int cluster_units = 32;
  double cluster_scale = 1.5;
  SyntheticFormat format = SyntheticFormat::kCriteo;
  // kColumnar: the key bits of the slot (feature_hash.h), stored in the file.
  int slot_bits = kDefaultSlotBits;
};

// The schema (delimited_format.h) that reads the kCsv output of `options`
// with a header: "label,1-13=dense,14-39=cat" plus "=multi" columns.
std::string SyntheticCsvSchema(const SyntheticOptions& options);

// What the generator knows about the data it wrote.
struct SyntheticInfo {
  int64_t rows = 0;
  double positive_rate = 0.0;
  // AUC and logloss of the planted (true) probabilities on the rows written:
  // the ceiling a perfect model would reach on them.
  double bayes_auc = 0.0;
  double bayes_logloss = 0.0;
  // With num_clusters > 1: the AUC of the planted probabilities with each
  // cluster's teacher network replaced by the mean of all clusters' -- about
  // what a model reaches that cannot tell the clusters apart. 0 otherwise.
  double cluster_blind_auc = 0.0;
  // Per task (num_tasks values; the first is bayes_auc): the AUC of each
  // task's planted probabilities against its labels.
  std::vector<double> task_bayes_auc;
};

// Validates options: rows >= 1, num_dense in [0, 64], num_slots in [1, 1023],
// num_clusters in [1, 16] (and at most 2^num_dense), cluster_units in [1,
// 1024], cluster_scale >= 0, vocabulary in [1, 2^32] (each of slot_vocabularies
// too, and num_slots of them if any), zipf_exponent > 0, scales >= 0,
// latent_rank in [0, 256], interacting_slots in [0, num_slots], a finite bias,
// num_tasks in [1, 16] (1 for kCriteo), multi_hot_slots in [0, num_slots],
// max_bag_size in [1, 1024], slot_bits in [1, 32] with room for num_slots, the
// Criteo shape for kCriteo, and planted tables (the sum over slots of
// vocabulary x (1 + latent_rank if interacting)) under 2 GiB. InvalidArgument
// naming the field otherwise.
Status ValidateSyntheticOptions(const SyntheticOptions& options);

// Writes `options.rows` examples to `path` in `options.format` (text: ids as
// 8-digit hex, dense counts as decimal integers, some dense values missing;
// the Criteo output reads with ReadCriteoFiles, the csv output with the
// csv format and SyntheticCsvSchema, both without bad lines), and
// `path + ".meta.json"` with the options, the format, the flags that read it
// and the SyntheticInfo. Both writes are atomic. The bytes depend only on the
// options (seed included). Row r is drawn from RandomStream(seed, r), so a
// shorter file holds a prefix of the rows of a longer one; the default
// options give the same rows as before multi-hot slots and per-slot
// vocabularies existed. Memory: the planted tables plus 9 bytes per row (the
// true probabilities and labels, for the exact AUC), a few chunks of text
// and, for kColumnar, one row group.
// `progress`, when set, is called on the calling thread about every 100k rows
// with the rows written so far, and last with `rows`.
// Fails with InvalidArgument (options) or IOError (writing).
Result<SyntheticInfo> WriteSynthetic(const std::string& path, const SyntheticOptions& options,
                                     const std::function<void(int64_t)>& progress = {});

// WriteSynthetic with the format set to kCriteo.
Result<SyntheticInfo> WriteSyntheticCriteo(const std::string& path,
                                           const SyntheticOptions& options,
                                           const std::function<void(int64_t)>& progress = {});

// Reads the "bayes_auc" field of `data_path + ".meta.json"`; NotFound if there
// is no such file, InvalidArgument naming the file and the field if it is
// not a meta file WriteSynthetic wrote (a field missing, unknown or of the
// wrong type).
Result<double> ReadSyntheticBayesAuc(const std::string& data_path);

// Reads the "task_bayes_auc" list of `data_path + ".meta.json"` (one value
// per task), or the single "bayes_auc" of a file written before tasks
// existed. Errors as ReadSyntheticBayesAuc.
Result<std::vector<double>> ReadSyntheticTaskBayesAuc(const std::string& data_path);

}  // namespace ember::io
