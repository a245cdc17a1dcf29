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
  if (m % p != 0) {
    return Status::InvalidArgument("schedule interleaved needs the micro-batches (", m,
                                   ") to be a multiple of the ranks (", p, "), got ",
                                   ToString(shape));
  }
  const int total = v * m;  // forwards per rank
  Orders orders(static_cast<size_t>(p));
  for (int rank = 0; rank < p; ++rank) {
    std::vector<Instr> forwards, backwards;
    for (int k = 0; k < total; ++k) {
      // Megatron: the k-th step of a rank belongs to group k / (p·v); within
      // it, p micro-batches pass through each local chunk in turn.
      const int in_group = k % (p * v);
      const int local = in_group / p;
      const int mb = (k / (p * v)) * p + k % p;
      forwards.push_back(Instr::Forward(mb, GlobalChunk(shape, rank, local)));
      backwards.push_back(Instr::Backward(mb, GlobalChunk(shape, rank, v - 1 - local)));
    }
    // Megatron runs every forward first when m = p.
    const int warmup = m == p ? total : (p - rank - 1) * 2 + (v - 1) * p;
    orders[static_cast<size_t>(rank)] = OneForwardOneBackward(forwards, backwards, warmup);
  }
  return orders;
}

void RegisterBuiltinSchedules(ScheduleRegistry& registry) {
  CHECK(registry.Add("gpipe", &GPipeOrder).ok()) << "built-in schedules register once";
  CHECK(registry.Add("1f1b", &OneFOneBOrder).ok()) << "built-in schedules register once";
  CHECK(registry.Add("interleaved", &InterleavedOrder).ok()) << "built-in schedules register once";
}

}  // namespace ember::pipeline
