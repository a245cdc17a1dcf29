#include "scheduler/program.h"

#include "ops/moe_routing_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

namespace ember::scheduler {
namespace {

// Terms summed one by one; beyond, log-spaced buckets evaluated at their
// middle (the terms vary slowly there), so that vocabularies of billions cost
// microseconds.
constexpr int64_t kExactTerms = 4096;
constexpr int kTailBuckets = 256;

// sum_{k=1..n} f(k), exactly up to kExactTerms and by buckets beyond.
template <typename F>
double SumOverRanks(int64_t n, const F& f) {
  double sum = 0.0;
  const int64_t exact = std::min(n, kExactTerms);
  for (int64_t k = 1; k <= exact; ++k) sum += f(static_cast<double>(k));
  if (n <= exact) return sum;
  const double ratio = std::pow(static_cast<double>(n) / exact, 1.0 / kTailBuckets);
  double lo = static_cast<double>(exact);
  for (int b = 0; b < kTailBuckets; ++b) {
    const double hi = b + 1 == kTailBuckets ? static_cast<double>(n) : lo * ratio;
    sum += (hi - lo) * f(std::sqrt(lo * hi));
    lo = hi;
  }
  return sum;
}

// Planners ask for the same sums many times (every slot, every candidate):
// remember them. Thread safety: guarded by the mutex.
template <typename F>
double Memoized(int which, int64_t n, double s, double draws, const F& compute) {
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, double, double>, double> cache;
  const auto key = std::make_tuple(which, n, s, draws);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const double value = compute();
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 100000) cache.clear();  // A bound, never reached by one plan.
  cache.emplace(key, value);
  return value;
}

double Harmonic(int64_t n, double s) {
  return Memoized(0, n, s, 0.0,
                  [&] { return SumOverRanks(n, [s](double k) { return std::pow(k, -s); }); });
}

ops::OpCost Scaled(ops::OpCost c, double per) { return {c.flops / per, c.bytes / per}; }

}  // namespace

double ExpectedDistinct(int64_t vocabulary, double exponent, double draws) {
  if (vocabulary <= 0 || draws <= 0) return 0.0;
  return Memoized(1, vocabulary, exponent, draws, [&] {
    const double h = Harmonic(vocabulary, exponent);
    // 1 - (1 - p)^n computed as -expm1(n log1p(-p)) for small p.
    return SumOverRanks(vocabulary, [&](double k) {
      const double p = std::pow(k, -exponent) / h;
      return -std::expm1(draws * std::log1p(-std::min(p, 1.0 - 1e-15)));
    });
  });
}

double Program::UniqueIdsPerBatch(int64_t batch) const {
  // Known vocabularies have a closed form; a trace is for data without.
  if (sparse.slot_vocabulary.empty() && sparse.key_trace != nullptr &&
      sparse.key_trace->examples() > 0) {
    // Memory tier size does not change a batch's distinct ids: the tier
    // that keeps every row, which evicts nothing, is the cheapest to play.
    return sparse.key_trace->Simulate(std::numeric_limits<double>::infinity(), batch).distinct;
  }
  return DistinctIds(static_cast<double>(batch));
}

TierTraffic Program::MemoryTierTraffic(double held_rows, int64_t batch) const {
  if (sparse.key_trace != nullptr && sparse.key_trace->examples() > 0) {
    return sparse.key_trace->Simulate(held_rows, batch);
  }
  TierTraffic traffic;
  const double rows = TableRows();
  traffic.distinct = UniqueIdsPerBatch(batch);
  traffic.hits = traffic.distinct * HitRate(held_rows);
  traffic.reads = traffic.distinct - traffic.hits;
  traffic.created = rows / std::max(1.0, static_cast<double>(sparse.training_examples) / batch);
  traffic.writes =
      traffic.reads + traffic.created * std::max(0.0, 1.0 - held_rows / std::max(1.0, rows));
  return traffic;
}

double Program::LateFraction(int64_t batch, int in_flight, int staleness) const {
  if (sparse.slot_vocabulary.empty() || in_flight <= staleness) return 0.0;
  const double per_slot = sparse.ids_per_example * batch / sparse.slot_vocabulary.size();
  const double s = sparse.zipf_exponent;
  double late = 0.0, total = 0.0;
  for (int64_t v : sparse.slot_vocabulary) {
    total += ExpectedDistinct(v, s, per_slot);
    late += Memoized(2, v, s, per_slot * 65536 + in_flight * 256 + staleness, [&] {
      const double h = Harmonic(v, s);
      return SumOverRanks(v, [&](double k) {
        const double p = std::pow(k, -s) / h;
        const double q = -std::expm1(per_slot * std::log1p(-std::min(p, 1.0 - 1e-15)));
        // P(Binomial(in_flight, q) <= staleness), term by term.
        double at_most = 0.0, term = std::pow(1.0 - q, in_flight);
        for (int j = 0; j <= staleness; ++j) {
          at_most += term;
          term *= q / std::max(1e-300, 1.0 - q) * (in_flight - j) / (j + 1.0);
        }
        return q * std::max(0.0, 1.0 - at_most);
      });
    });
  }
  return total > 0 ? late / total : 0.0;
}

double Program::TableRows() const {
  return DistinctIds(static_cast<double>(sparse.training_examples));
}

double Program::DistinctIds(double examples) const {
  const double ids = sparse.ids_per_example * examples;
  if (sparse.slot_vocabulary.empty()) return ids;
  const double per_slot = ids / sparse.slot_vocabulary.size();
  double distinct = 0.0;
  for (int64_t v : sparse.slot_vocabulary) {
    distinct += ExpectedDistinct(v, sparse.zipf_exponent, per_slot);
  }
  return distinct;
}

double Program::HitRate(double rows) const {
  const double table = TableRows();
  if (rows >= table) return 1.0;
  if (rows <= 0) return 0.0;
  if (sparse.slot_vocabulary.empty()) return rows / table;
  double total_vocabulary = 0.0;
  for (int64_t v : sparse.slot_vocabulary) total_vocabulary += static_cast<double>(v);
  double mass = 0.0;
  for (int64_t v : sparse.slot_vocabulary) {
    const int64_t held = std::min<int64_t>(v, std::llround(rows * v / total_vocabulary));
    mass += Harmonic(held, sparse.zipf_exponent) / Harmonic(v, sparse.zipf_exponent);
  }
  return mass / sparse.slot_vocabulary.size();
}

ops::OpCost Program::StageCost(Stage stage, bool backward) const {
  ops::OpCost total;
  for (const ProgramOp& op : ops) {
    if (op.stage != stage) continue;
    const ops::OpCost& c = backward ? op.backward : op.forward;
    total.flops += c.flops;
    total.bytes += c.bytes;
  }
  return total;
}

int Program::OpsIn(Stage stage) const {
  int n = 0;
  for (const ProgramOp& op : ops) n += op.stage == stage;
  return n;
}

double Program::DenseStateBytes() const {
  return 4.0 * dense_parameters * (2 + sparse.dense_state_per_param);  // value, grad, state
}

Result<Program> BuildProgram(const std::string& model, const ops::Graph& dense,
                             const SparseFeatures& sparse) {
  Result<int> pooled = dense.FindValue("pooled");
  if (!pooled.ok())
    return Status::InvalidArgument("the dense graph of ", model, " has no pooled input");
  const int64_t pooled_width = dense.values()[*pooled].elements();
  if (pooled_width != int64_t{sparse.num_slots} * sparse.embedding_dim) {
    return Status::InvalidArgument("the dense graph of ", model, " reads ", pooled_width,
                                   " pooled floats per example, the data gives ", sparse.num_slots,
                                   " slots x ", sparse.embedding_dim);
  }
  Program p;
  p.model = model;
  p.sparse = sparse;
  p.dense_parameters = dense.parameter_count();
  const double dim = sparse.embedding_dim;
  const double ids = sparse.ids_per_example;
  auto tensor = [&p](const std::string& name, int producer, double bytes) {
    p.tensors.push_back({name, producer, bytes});
    return static_cast<int>(p.tensors.size()) - 1;
  };
  auto add = [&p](ProgramOp op) {
    p.ops.push_back(std::move(op));
    return static_cast<int>(p.ops.size()) - 1;
  };
  // Sparse side, per example. Pull and push work per distinct id is set by
  // the cost model from UniqueIdsPerBatch; here their bytes per id.
  const double example_bytes = 4.0 * (sparse.num_labels + sparse.num_dense) + 8.0 * ids;
  const int batch_in = tensor("batch", -1, example_bytes);
  const int read =
      add({"read", "read", true, Stage::kRead, {0, example_bytes}, {}, {batch_in}, {}});
  const int keys = tensor("keys", read, 8.0 * ids);
  p.ops[read].outputs = {keys};
  const int unique =
      add({"unique", "unique", true, Stage::kUnique, {0, 24.0 * ids}, {}, {keys}, {}});
  const int rows = tensor("rows", unique, 4.0 * dim * ids);
  p.ops[unique].outputs = {rows};
  const int pull = add({"embedding.pull",
                        "embedding_pull",
                        true,
                        Stage::kPull,
                        {0, 4.0 * dim * ids},
                        {},
                        {rows},
                        {}});
  const int pulled = tensor("pulled_rows", pull, 4.0 * dim * ids);
  p.ops[pull].outputs = {pulled};
  // Pooling runs in the dense stage: a sum over each bag, and its scatter.
  const int pool = add({"embedding.pool",
                        "embedding_bag",
                        false,
                        Stage::kDense,
                        {dim * ids, 8.0 * dim * ids},
                        {dim * ids, 8.0 * dim * ids},
                        {pulled},
                        {}});
  const int pooled_tensor = tensor("pooled", pool, 4.0 * pooled_width);
  p.ops[pool].outputs = {pooled_tensor};
  // Dense side: the model's graph, node by node (costs per example).
  std::vector<int> value_tensor(dense.values().size(), -1);
  value_tensor[*pooled] = pooled_tensor;
  for (int input : dense.inputs()) {
    if (value_tensor[input] < 0) {
      value_tensor[input] =
          tensor(dense.values()[input].name, -1, 4.0 * dense.values()[input].elements());
    }
  }
  const int64_t kPerExample = 1024;  // Costs are linear in the batch; read at 1024.
  int last = pool;
  for (size_t n = 0; n < dense.nodes().size(); ++n) {
    const ops::GraphNode& node = dense.nodes()[n];
    ProgramOp op{node.name,
                 node.op,
                 false,
                 Stage::kDense,
                 Scaled(dense.NodeCost(static_cast<int>(n), kPerExample, false), kPerExample),
                 Scaled(dense.NodeCost(static_cast<int>(n), kPerExample, true), kPerExample),
                 {},
                 {}};
    for (int v : node.inputs) {
      if (value_tensor[v] >= 0) op.inputs.push_back(value_tensor[v]);
    }
    last = add(op);
    if (node.op == "moe_expert_fc") {
      const std::vector<int64_t>& weight = dense.values()[node.inputs[1]].shape;  // [E, out, in]
      const int64_t slots = dense.values()[node.inputs[0]].shape[0];
      const double rows = static_cast<double>(
          weight[0] * ops::MoeNodeCapacity(kPerExample, weight[0], slots,
                                           node.attrs.GetInt("k", 1), node.attrs)) /
                          kPerExample;
      // A chain's rows cross at its start (in) and its end (out).
      const int from = dense.values()[node.inputs[0]].producer;
      const bool starts = from < 0 || dense.nodes()[from].op != "moe_expert_fc";
      bool ends = true;
      for (const ops::GraphNode& other : dense.nodes()) {
        if (other.op == "moe_expert_fc" && other.inputs[0] == node.outputs[0]) ends = false;
      }
      if (starts) ++p.expert_chains;
      p.expert_floats_per_example += rows * static_cast<double>((starts ? weight[2] : 0) +
                                                                (ends ? weight[1] : 0));
    }
    for (int v : node.outputs) {
      value_tensor[v] = tensor(dense.values()[v].name, last, 4.0 * dense.values()[v].elements());
      p.tensors[value_tensor[v]].has_gradient = !dense.values()[v].saved_for_backward;
      p.ops[last].outputs.push_back(value_tensor[v]);
    }
  }
  const int logits = p.ops[last].outputs.empty() ? pooled_tensor : p.ops[last].outputs[0];
  const double tasks = sparse.num_labels;
  const int loss = add({"loss",
                        "sigmoid_cross_entropy",
                        false,
                        Stage::kDense,
                        {4 * tasks, 12 * tasks},
                        {2 * tasks, 8 * tasks},
                        {logits},
                        {}});
  // The dense optimizer reads and writes every parameter once per step: its
  // work is per step, not per example, and the cost model adds it as such.
  add({"dense.optimizer", "dense_optimizer", false, Stage::kDense, {}, {}, {}, {}});
  const int grads = tensor("pooled_grad", loss, 4.0 * pooled_width);
  add({"embedding.push",
       "embedding_push",
       true,
       Stage::kPush,
       {},
       {0, 4.0 * dim * ids},
       {grads},
       {}});
  return p;
}

}  // namespace ember::scheduler
