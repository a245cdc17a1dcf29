#pragma once

// Pipeline schedules as data: for p ranks, v virtual stages (chunks) per rank
// and m micro-batches, the ordered instructions that each rank runs in one
// training step. The model's dense part is cut into p·v consecutive chunks;
// chunk c lives on rank c % p (Megatron's placement: rank r holds chunks
// r, r + p, r + 2p, ...). A schedule says nothing about what a chunk
// computes; pipeline/schedule_checker.h proves one complete and free of
// deadlock, pipeline/schedule_simulator.h times it and
// pipeline/schedule_drawing.h draws it, all without a model.
//
// A schedule kind is one function giving each rank's order of forwards and
// backwards (ComputeOrder), added to a ScheduleRegistry by name. MakeSchedule
// adds the communication that order implies (LowerToInstructions) and the
// optimizer step.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::pipeline {

enum class InstrKind {
  kForward,         // forward of (micro_batch, chunk) on chunk's rank
  kBackward,        // backward of (micro_batch, chunk); accumulates gradients (but
                    // those kBackwardWeight computes, in a schedule that has it)
  kBackwardWeight,  // the parameter gradients that (micro_batch, chunk)'s kBackward
                    // left (zero-bubble schedules: its W)
  kSendActivation,  // output of forward (micro_batch, chunk) to chunk + 1's rank
  kRecvActivation,  // the same message, on chunk + 1's rank, from chunk's rank
  kSendGrad,        // input gradient of backward (micro_batch, chunk) to chunk - 1's rank
  kRecvGrad,        // the same message, on chunk - 1's rank, from chunk's rank
  kOptimizerStep,   // applies the gradients accumulated over every micro-batch
};

// One instruction. For a send and its receive, (micro_batch, chunk) name the
// message by the chunk that produced it, so both sides carry the same
// triple (kind of message, micro_batch, chunk); `peer` is the other rank.
struct Instr {
  InstrKind kind = InstrKind::kForward;
  int micro_batch = -1;  // -1 for kOptimizerStep
  int chunk = -1;        // global chunk 0..p·v-1; -1 for kOptimizerStep
  int peer = -1;         // sends and receives only

  static Instr Forward(int micro_batch, int chunk) {
    return {InstrKind::kForward, micro_batch, chunk, -1};
  }
  static Instr Backward(int micro_batch, int chunk) {
    return {InstrKind::kBackward, micro_batch, chunk, -1};
  }
  static Instr BackwardWeight(int micro_batch, int chunk) {
    return {InstrKind::kBackwardWeight, micro_batch, chunk, -1};
  }
  static Instr OptimizerStep() { return {InstrKind::kOptimizerStep, -1, -1, -1}; }

  bool is_compute() const {
    return kind == InstrKind::kForward || kind == InstrKind::kBackward ||
           kind == InstrKind::kBackwardWeight;
  }
  bool is_send() const {
    return kind == InstrKind::kSendActivation || kind == InstrKind::kSendGrad;
  }
  bool is_recv() const {
    return kind == InstrKind::kRecvActivation || kind == InstrKind::kRecvGrad;
  }
  bool operator==(const Instr& other) const = default;
};

// Short text: "F3.1" / "B3.1" / "W3.1" (forward / backward / weight
// gradients of micro-batch 3 on chunk 1), "SendAct(3.1>r1)", "RecvAct(3.1<r0)", "SendGrad(3.1>r0)",
// "RecvGrad(3.1<r1)", "Step".
std::string ToString(const Instr& instr);

// The grid a schedule is made for.
struct ScheduleShape {
  int ranks = 1;           // p: pipeline ranks
  int virtual_stages = 1;  // v: chunks per rank
  int micro_batches = 1;   // m: micro-batches per step
  // G: interleaved schedules pass the micro-batches through each chunk in
  // groups of G (Megatron's microbatch_group_size_per_vp_stage); 0: p.
  int group = 0;

  int chunks() const { return ranks * virtual_stages; }
  int group_size() const { return group > 0 ? group : ranks; }
  // The rank that holds `chunk`.
  int RankOf(int chunk) const { return chunk % ranks; }
};

// "p=2 v=2 m=4", and " G=3" when the group is set.
std::string ToString(const ScheduleShape& shape);

// InvalidArgument naming the field unless p, v and m are all >= 1 and the
// group >= 0.
Status ValidateShape(const ScheduleShape& shape);

// One step's instructions: ranks[r] is rank r's list, run in order.
struct Schedule {
  std::string kind;  // the registered name it was made with
  ScheduleShape shape;
  std::vector<std::vector<Instr>> ranks;

  // Whether the backwards are split into B and W (any kBackwardWeight; the
  // checker then requires one for every backward).
  bool splits_backward() const;
};

// The instruction after which a micro-batch's activations on a chunk are no
// longer needed: its kBackwardWeight in a schedule that splits, else its
// kBackward (what memory in flight counts).
InstrKind ReleaseKind(const Schedule& schedule);

// A schedule kind: each rank's order of kForward and kBackward instructions
// (no communication, no optimizer step) for a valid shape, or InvalidArgument
// naming what the kind requires of the shape that `shape` lacks.
using ComputeOrder = std::function<Result<std::vector<std::vector<Instr>>>(const ScheduleShape&)>;

// Adds to `compute` (per rank, as a ComputeOrder returns it) the messages
// between chunks on different ranks and a final kOptimizerStep per rank.
// Each send follows the compute that produces its tensor. Each receive comes
// before the compute that needs it, and a rank receives from each peer in
// the order that peer sends (so that backends matching messages by arrival
// order, like NCCL, see the same pairs as those matching by tag): a message
// needed later than one sent after it is received early. Receiving early
// never waits longer than the later message would have.
// Internal naming the rank and instruction when a compute needs a message no
// compute in `compute` produces (a broken ComputeOrder).
Result<Schedule> LowerToInstructions(const std::string& kind, const ScheduleShape& shape,
                                     const std::vector<std::vector<Instr>>& compute);

// Schedule kinds by name.
// Thread safety: Add must not run concurrently with anything else; the
// const methods may be called concurrently.
class ScheduleRegistry {
 public:
  // AlreadyExists naming `name` when it is taken; InvalidArgument when empty.
  Status Add(const std::string& name, ComputeOrder order);
  // NotFound naming `name` and the known kinds; the kind's InvalidArgument
  // for a shape it does not support; Internal from LowerToInstructions.
  Result<Schedule> Make(const std::string& name, const ScheduleShape& shape) const;
  // The registered names, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, ComputeOrder> orders_;
};

// Registers "gpipe", "1f1b", "interleaved" and "zb-h1"
// (pipeline/schedule_kinds.h).
void RegisterBuiltinSchedules(ScheduleRegistry& registry);

// A registry holding the built-in kinds, made once.
const ScheduleRegistry& BuiltinSchedules();

}  // namespace ember::pipeline
