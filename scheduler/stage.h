#pragma once

// The stages of a training step, named once: the pipeline's runner
// (pipeline/), its trace spans and summary, and the planner's Program and
// cost model all address a stage by this enum, never by its position.

#include <array>
#include <cstddef>
#include <initializer_list>

namespace ember::scheduler {

// In the order a batch passes them: read (parse and hash a batch), unique
// (its distinct keys), pull (their rows), dense (forward, loss, backward,
// dense optimizer), push (row gradients and the sparse optimizer).
enum class Stage { kRead = 0, kUnique, kPull, kDense, kPush };
inline constexpr int kNumStages = 5;
inline constexpr std::array<Stage, kNumStages> kAllStages = {
    Stage::kRead, Stage::kUnique, Stage::kPull, Stage::kDense, Stage::kPush};

// "read", "unique", "pull", "dense" or "push".
const char* StageName(Stage stage);

// A value per stage, addressed by Stage; iterates in stage order.
template <typename T>
class PerStage {
 public:
  // Container types, for generic code (GoogleTest prints a PerStage as its
  // values).
  using value_type = T;
  using iterator = typename std::array<T, kNumStages>::iterator;
  using const_iterator = typename std::array<T, kNumStages>::const_iterator;

  PerStage() : values_{} {}
  // Every stage's value `value`.
  static PerStage Filled(const T& value) {
    PerStage p;
    p.values_.fill(value);
    return p;
  }
  // Values in stage order (read, unique, pull, dense, push); REQUIRES: at
  // most kNumStages values (the rest stay T()).
  PerStage(std::initializer_list<T> values) : values_{} {
    size_t i = 0;
    for (const T& v : values) values_.at(i++) = v;
  }

  T& operator[](Stage stage) { return values_[static_cast<size_t>(stage)]; }
  const T& operator[](Stage stage) const { return values_[static_cast<size_t>(stage)]; }
  iterator begin() { return values_.begin(); }
  iterator end() { return values_.end(); }
  const_iterator begin() const { return values_.begin(); }
  const_iterator end() const { return values_.end(); }
  bool operator==(const PerStage& other) const { return values_ == other.values_; }

 private:
  std::array<T, kNumStages> values_;
};

}  // namespace ember::scheduler
