#include "pipeline/schedule_kinds.h"

#include <algorithm>

namespace ember::pipeline {
namespace {

using Orders = std::vector<std::vector<Instr>>;

// The global chunk of rank `rank`'s `local`-th chunk.
int GlobalChunk(const ScheduleShape& shape, int rank, int local) {
  return local * shape.ranks + rank;
}

// Warm-up forwards, then one forward and one backward at a time, then the
// remaining backwards: the common shape of both 1F1B kinds, from the rank's
// forward and backward sequences (equally long) and its warm-up count.
std::vector<Instr> OneForwardOneBackward(const std::vector<Instr>& forwards,
                                         const std::vector<Instr>& backwards, int warmup) {
  const int total = static_cast<int>(forwards.size());
  warmup = std::min(warmup, total);
  std::vector<Instr> order(forwards.begin(), forwards.begin() + warmup);
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(forwards[static_cast<size_t>(warmup + k)]);
    order.push_back(backwards[static_cast<size_t>(k)]);
  }
  order.insert(order.end(), backwards.begin() + (total - warmup), backwards.end());
  return order;
}

}  // namespace

Result<Orders> GPipeOrder(const ScheduleShape& shape) {
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  Orders orders(static_cast<size_t>(shape.ranks));
  for (int rank = 0; rank < shape.ranks; ++rank) {
    std::vector<Instr>& order = orders[static_cast<size_t>(rank)];
    for (int local = 0; local < shape.virtual_stages; ++local) {
      for (int mb = 0; mb < shape.micro_batches; ++mb) {
        order.push_back(Instr::Forward(mb, GlobalChunk(shape, rank, local)));
      }
    }
    for (int local = shape.virtual_stages - 1; local >= 0; --local) {
      for (int mb = 0; mb < shape.micro_batches; ++mb) {
        order.push_back(Instr::Backward(mb, GlobalChunk(shape, rank, local)));
      }
    }
  }
  return orders;
}

Result<Orders> OneFOneBOrder(const ScheduleShape& shape) {
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  if (shape.virtual_stages != 1) {
    return Status::InvalidArgument("schedule 1f1b needs 1 virtual stage per rank, got ",
                                   shape.virtual_stages, " (", ToString(shape),
                                   "); use interleaved for more");
  }
  Orders orders(static_cast<size_t>(shape.ranks));
  for (int rank = 0; rank < shape.ranks; ++rank) {
    std::vector<Instr> forwards, backwards;
    for (int mb = 0; mb < shape.micro_batches; ++mb) {
      forwards.push_back(Instr::Forward(mb, rank));
      backwards.push_back(Instr::Backward(mb, rank));
    }
    orders[static_cast<size_t>(rank)] =
        OneForwardOneBackward(forwards, backwards, shape.ranks - rank - 1);
  }
  return orders;
}

Result<Orders> InterleavedOrder(const ScheduleShape& shape) {
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  const int p = shape.ranks, v = shape.virtual_stages, m = shape.micro_batches;
  const int g = shape.group_size();
  // Megatron's conditions (schedules.py, forward_backward_pipelining_with_
  // interleaving), with its reasons.
  if (g < p || g > m) {
    return Status::InvalidArgument(
        "schedule interleaved passes the micro-batches through each chunk in groups of G (",
        g, shape.group > 0 ? "" : ", the ranks", "), which must lie in [p, m] = [", p, ", ", m,
        "]: a group smaller than the ranks leaves a rank without work, one larger than the "
        "micro-batches is not a group; got ", ToString(shape));
  }
  if (const int last = m % g; last > 0 && last < p) {
    return Status::InvalidArgument(
        "schedule interleaved: the last group of micro-batches (m mod G = ", last,
        ") must be empty or at least the ranks (", p,
        "): a shorter one stalls the pipeline on its dependencies; got ", ToString(shape));
  }
  // The order of a rank's forwards: group after group, each group's
  // micro-batches through the rank's chunks in turn (the last group takes
  // what remains); its backwards run the same order through the chunks in
  // reverse.
  std::vector<std::pair<int, int>> table;  // (micro-batch, local chunk)
  for (int first = 0; first < m; first += g) {
    const int end = first + g >= m ? m : first + g;
    for (int local = 0; local < v; ++local) {
      for (int mb = first; mb < end; ++mb) table.emplace_back(mb, local);
    }
  }
  const int total = v * m;  // forwards per rank
  Orders orders(static_cast<size_t>(p));
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Instr> forwards, backwards;
    for (const auto& [mb, local] : table) {
      forwards.push_back(Instr::Forward(mb, GlobalChunk(shape, rank, local)));
      backwards.push_back(Instr::Backward(mb, GlobalChunk(shape, rank, v - 1 - local)));
    }
    // Megatron's warm-up since November 2024: (v - 1)·G forwards on every
    // rank and 2 more per later rank; when that covers every forward (m = p
    // on the first ranks) the rank runs them all first, while the later
    // ranks start 1F1B and hold fewer activations in flight.
    const int warmup = std::min(total, (p - rank - 1) * 2 + (v - 1) * g);
    orders[static_cast<size_t>(rank)] = OneForwardOneBackward(forwards, backwards, warmup);
  }
  return orders;
}

Result<Orders> ZeroBubbleH1Order(const ScheduleShape& shape) {
  EMBER_RETURN_IF_ERROR(ValidateShape(shape));
  if (shape.virtual_stages != 1) {
    return Status::InvalidArgument("schedule zb-h1 needs 1 virtual stage per rank, got ",
                                   shape.virtual_stages, " (", ToString(shape), ")");
  }
  const int p = shape.ranks, m = shape.micro_batches;
  Orders orders(static_cast<size_t>(p));
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Instr>& order = orders[static_cast<size_t>(rank)];
    const int warmup = std::min(p - rank, m);
    const int lag = std::min(rank, m);  // B(k) is followed by W(k - lag).
    for (int mb = 0; mb < warmup; ++mb) order.push_back(Instr::Forward(mb, rank));
    for (int mb = 0; mb < m; ++mb) {
      order.push_back(Instr::Backward(mb, rank));
      if (mb >= lag) order.push_back(Instr::BackwardWeight(mb - lag, rank));
      if (mb + warmup < m) order.push_back(Instr::Forward(mb + warmup, rank));
    }
    for (int mb = m - lag; mb < m; ++mb) order.push_back(Instr::BackwardWeight(mb, rank));
  }
  return orders;
}

void RegisterBuiltinSchedules(ScheduleRegistry& registry) {
  CHECK(registry.Add("gpipe", &GPipeOrder).ok()) << "built-in schedules register once";
  CHECK(registry.Add("1f1b", &OneFOneBOrder).ok()) << "built-in schedules register once";
  CHECK(registry.Add("interleaved", &InterleavedOrder).ok()) << "built-in schedules register once";
  CHECK(registry.Add("zb-h1", &ZeroBubbleH1Order).ok()) << "built-in schedules register once";
}

}  // namespace ember::pipeline
