#include "scheduler/pipeline_partition.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/status.h"

namespace ember::scheduler {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

Status ValidateOptions(const PipelinePartitionOptions &o,
                       const CostModel &cost) {
  if (o.ranks < 1)
    return Status::InvalidArgument("pipeline partition: ranks ", o.ranks,
                                   " < 1");
  if (o.virtual_stages < 1) {
    return Status::InvalidArgument("pipeline partition: virtual_stages ",
                                   o.virtual_stages, " < 1");
  }
  if (o.micro_batch_size < 1) {
    return Status::InvalidArgument("pipeline partition: micro_batch_size ",
                                   o.micro_batch_size, " < 1");
  }
  if (o.rank_activation_limit_bytes < 0) {
    return Status::InvalidArgument(
        "pipeline partition: rank_activation_limit_bytes ",
        o.rank_activation_limit_bytes, " < 0");
  }
  if (o.micro_batches_in_flight < 1) {
    return Status::InvalidArgument(
        "pipeline partition: micro_batches_in_flight ",
        o.micro_batches_in_flight, " < 1");
  }
  if (o.threads < 1)
    return Status::InvalidArgument("pipeline partition: threads ", o.threads,
                                   " < 1");
  if (o.device < 0 ||
      o.device >= static_cast<int>(cost.graph().devices.size())) {
    return Status::InvalidArgument("pipeline partition: device ", o.device,
                                   " is not a device of the resource graph (",
                                   cost.graph().devices.size(), " devices)");
  }
  return Status::OK();
}

// Forward + backward seconds of each node at the micro-batch size.
std::vector<double> NodeSeconds(const ops::Graph &graph, const CostModel &cost,
                                const PipelinePartitionOptions &o) {
  const double batch = static_cast<double>(o.micro_batch_size);
  std::vector<double> seconds;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    ProgramOp op;
    op.name = graph.nodes()[n].name;
    op.op = graph.nodes()[n].op;
    // DenseOpSeconds wants work per example.
    for (const bool backward : {false, true}) {
      ops::OpCost c =
          graph.NodeCost(static_cast<int>(n), o.micro_batch_size, backward);
      c.flops /= batch;
      c.bytes /= batch;
      (backward ? op.backward : op.forward) = c;
    }
    seconds.push_back(
        cost.DenseOpSeconds(op, o.micro_batch_size, o.device, o.threads));
  }
  return seconds;
}

// bytes[j][i - j - 1]: activation bytes per micro-batch of a chunk of nodes
// [j, i): the values its nodes make, and the activations made before j that
// they read.
std::vector<std::vector<int64_t>> SegmentBytes(const ops::Graph &graph,
                                               int64_t batch) {
  const int n = static_cast<int>(graph.nodes().size());
  const auto value_bytes = [&](int v) {
    return graph.values()[v].elements() * 4 * batch;
  };
  std::vector<std::vector<int64_t>> bytes(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    std::set<int> read_before;
    int64_t total = 0;
    for (int i = j; i < n; ++i) {
      const ops::GraphNode &node = graph.nodes()[i];
      for (int v : node.outputs)
        total += value_bytes(v);
      for (int v : node.inputs) {
        const ops::GraphValue &value = graph.values()[v];
        if (value.kind == ops::ValueKind::kActivation && value.producer < j &&
            read_before.insert(v).second) {
          total += value_bytes(v);
        }
      }
      bytes[j].push_back(total);
    }
  }
  return bytes;
}

struct Split {
  double bottleneck = kInfinity;
  double squares = kInfinity; // Tie-break: the most even split.
  std::vector<int> ends;      // end_node of each chunk
};

// Min-max split of n nodes into k consecutive chunks, each chunk's bytes at
// most cap (0: none); bottleneck infinity when none fits.
Split MinMaxSplit(const std::vector<double> &prefix,
                  const std::vector<std::vector<int64_t>> &bytes, int k,
                  int64_t cap) {
  const int n = static_cast<int>(prefix.size()) - 1;
  const auto fits = [&](int j, int i) {
    return cap == 0 || bytes[j][i - j - 1] <= cap;
  };
  // best[c][i]: first i nodes in c chunks; from[c][i]: where the last began.
  std::vector<std::vector<std::pair<double, double>>> best(
      static_cast<size_t>(k + 1),
      std::vector<std::pair<double, double>>(static_cast<size_t>(n + 1),
                                             {kInfinity, kInfinity}));
  std::vector<std::vector<int>> from(static_cast<size_t>(k + 1),
                                     std::vector<int>(n + 1, -1));
  best[0][0] = {0, 0};
  for (int c = 1; c <= k; ++c) {
    for (int i = c; i <= n - (k - c); ++i) {
      for (int j = c - 1; j < i; ++j) {
        if (best[c - 1][j].first == kInfinity || !fits(j, i))
          continue;
        const double s = prefix[i] - prefix[j];
        const std::pair<double, double> candidate{
            std::max(best[c - 1][j].first, s), best[c - 1][j].second + s * s};
        if (candidate < best[c][i]) {
          best[c][i] = candidate;
          from[c][i] = j;
        }
      }
    }
  }
  Split split;
  if (best[k][n].first == kInfinity)
    return split;
  split.bottleneck = best[k][n].first;
  split.squares = best[k][n].second;
  split.ends.assign(static_cast<size_t>(k), 0);
  for (int c = k, i = n; c >= 1; i = from[c][i], --c)
    split.ends[c - 1] = i;
  return split;
}

PipelinePartition MakePartition(const Split &split,
                                const std::vector<double> &prefix,
                                const std::vector<std::vector<int64_t>> &bytes,
                                const PipelinePartitionOptions &o) {
  PipelinePartition partition;
  partition.rank_activation_bytes.assign(static_cast<size_t>(o.ranks), 0);
  int begin = 0;
  for (size_t c = 0; c < split.ends.size(); ++c) {
    PipelineChunk chunk;
    chunk.first_node = begin;
    chunk.end_node = split.ends[c];
    chunk.seconds = prefix[chunk.end_node] - prefix[begin];
    chunk.activation_bytes = bytes[begin][chunk.end_node - begin - 1];
    partition.rank_activation_bytes[c % static_cast<size_t>(o.ranks)] +=
        chunk.activation_bytes * o.micro_batches_in_flight;
    partition.bottleneck_seconds =
        std::max(partition.bottleneck_seconds, chunk.seconds);
    partition.chunks.push_back(chunk);
    begin = chunk.end_node;
  }
  return partition;
}

bool WithinLimit(const PipelinePartition &partition, int64_t limit) {
  if (limit == 0)
    return true;
  for (int64_t b : partition.rank_activation_bytes) {
    if (b > limit)
      return false;
  }
  return true;
}

// Per-chunk byte caps to try, loosest first: limit / in_flight, then up to
// kMaxCaps of the chunk byte counts between it and limit / (v in_flight),
// then that. {0} (no cap) without a limit.
std::vector<int64_t> ChunkCaps(const std::vector<std::vector<int64_t>> &bytes,
                               int64_t limit, int64_t in_flight, int v) {
  if (limit == 0)
    return {0};
  constexpr size_t kMaxCaps = 32;
  const int64_t loose = limit / in_flight, tight = limit / in_flight / v;
  std::set<int64_t> between;
  for (const std::vector<int64_t> &row : bytes) {
    for (int64_t b : row) {
      if (b > tight && b < loose)
        between.insert(b);
    }
  }
  std::vector<int64_t> caps = {loose};
  const std::vector<int64_t> sorted(between.rbegin(), between.rend());
  const size_t stride =
      std::max<size_t>(1, (sorted.size() + kMaxCaps - 1) / kMaxCaps);
  for (size_t i = 0; i < sorted.size(); i += stride)
    caps.push_back(sorted[i]);
  if (tight < loose)
    caps.push_back(tight);
  return caps;
}

} // namespace

int PipelinePartition::ChunkOf(int node) const {
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (node >= chunks[c].first_node && node < chunks[c].end_node)
      return static_cast<int>(c);
  }
  return -1;
}

Result<PipelinePartition>
PartitionDenseGraph(const ops::Graph &graph, const CostModel &cost,
                    const PipelinePartitionOptions &options) {
  EMBER_RETURN_IF_ERROR(ValidateOptions(options, cost));
  const int k = options.ranks * options.virtual_stages;
  const int n = static_cast<int>(graph.nodes().size());
  if (n < k) {
    return Status::InvalidArgument("pipeline partition: the graph has ", n,
                                   " nodes, fewer than the p*v = ", k,
                                   " chunks (p=", options.ranks,
                                   " v=", options.virtual_stages, ")");
  }
  const std::vector<double> seconds = NodeSeconds(graph, cost, options);
  std::vector<double> prefix(1, 0.0);
  for (double s : seconds)
    prefix.push_back(prefix.back() + s);
  const std::vector<std::vector<int64_t>> bytes =
      SegmentBytes(graph, options.micro_batch_size);
  const int64_t limit = options.rank_activation_limit_bytes;
  const int64_t in_flight = options.micro_batches_in_flight;
  for (int i = 0; i < n && limit > 0; ++i) {
    if (bytes[i][0] * in_flight > limit) {
      return Status::ResourceExhausted(
          "pipeline partition: node \"", graph.nodes()[i].name,
          "\" alone holds ", bytes[i][0] * in_flight, " activation bytes (",
          in_flight, " micro-batches of ", options.micro_batch_size,
          " examples), over the rank limit of ", limit, " bytes");
    }
  }
  // The limit holds a rank's chunks together; the split caps each chunk
  // alone. Caps from the whole rank's limit down to an equal share of it
  // (where any split fits the rank), through the byte counts chunks can have
  // in between; the fastest split within the limit wins.
  PipelinePartition last;
  bool found = false;
  for (int64_t cap :
       ChunkCaps(bytes, limit, in_flight, options.virtual_stages)) {
    const Split split = MinMaxSplit(prefix, bytes, k, cap);
    if (split.bottleneck == kInfinity)
      continue;
    PipelinePartition partition = MakePartition(split, prefix, bytes, options);
    if (WithinLimit(partition, limit)) {
      if (!found || partition.bottleneck_seconds < last.bottleneck_seconds)
        last = partition;
      found = true;
    } else if (!found) {
      last = partition;
    }
  }
  if (found)
    return last;
  std::string needs;
  if (!last.chunks.empty()) {
    for (size_t r = 0; r < last.rank_activation_bytes.size(); ++r) {
      needs += internal::StrCat(r == 0 ? "" : ", ", "rank ", r, ": ",
                                last.rank_activation_bytes[r]);
    }
  } else {
    needs = "no chunk of consecutive nodes fits";
  }
  return Status::ResourceExhausted(
      "pipeline partition: no split of ", n, " nodes into ", k,
      " chunks (p=", options.ranks, " v=", options.virtual_stages,
      ") keeps every rank within ", limit, " activation bytes (", in_flight,
      " micro-batches of ", options.micro_batch_size,
      " examples in flight; closest: ", needs, ")");
}

std::string ToText(const ops::Graph &graph,
                   const PipelinePartition &partition) {
  std::string text;
  for (size_t c = 0; c < partition.chunks.size(); ++c) {
    const PipelineChunk &chunk = partition.chunks[c];
    text += internal::StrCat(
        "chunk ", c, ": nodes ", chunk.first_node, "-", chunk.end_node - 1,
        " (", graph.nodes()[chunk.first_node].name, "..",
        graph.nodes()[chunk.end_node - 1].name, "), ", chunk.seconds * 1e3,
        " ms, ", chunk.activation_bytes, " bytes\n");
  }
  return text;
}

} // namespace ember::scheduler
