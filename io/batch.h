#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::io {

// A 64-bit feature key: the slot in the high `slot_bits` bits, a hash of the
// categorical value in the rest. See feature_hash.h.
using Key = uint64_t;

// One mini-batch of examples in columnar form.
//
// Sparse features are one bag of keys per (example, slot), stored as CSR in
// example-major order: the keys of example i, slot s are
//   keys[offsets[i * num_slots + s] .. offsets[i * num_slots + s + 1]).
// A single-valued slot (Criteo) has exactly one key per bag; a missing value
// is a key of its own (the hash of the empty value), so bags are never empty
// for Criteo input. Multi-valued slots (bags of ids) may have empty bags.
//
// Each example has `num_labels` labels (one per task; 1 unless the data is
// multi-task), stored example-major: the labels of example i are
//   labels[i * num_labels .. (i + 1) * num_labels).
struct Batch {
  int64_t size = 0;              // Number of examples.
  int num_dense = 0;             // Dense features per example.
  int num_slots = 0;             // Categorical slots per example.
  int num_labels = 1;            // Labels per example.
  std::vector<float> labels;     // [size x num_labels]
  std::vector<float> dense;      // [size x num_dense], already transformed.
  std::vector<int64_t> offsets;  // [size * num_slots + 1]
  std::vector<Key> keys;         // [offsets.back()]

  // Empties the batch and sets its shape, keeping capacity.
  void Clear(int num_dense_features, int num_categorical_slots, int labels_per_example = 1);
  // Number of keys in the bag of example i, slot s.
  int64_t BagSize(int64_t i, int s) const {
    return offsets[i * num_slots + s + 1] - offsets[i * num_slots + s];
  }
};

// Appends the examples of `from` to `to`, in order.
// REQUIRES: same num_dense, num_slots and num_labels, and `to` cleared
// (offsets non-empty).
void AppendBatch(const Batch& from, Batch* to);

// Appends to `to` the examples i of `from` whose index `first + i` is
// `offset` modulo `every`, in order: one rank's share of examples read in
// pieces (TextReadOptions::keep_every). REQUIRES: every >= 1, 0 <= offset <
// every, first >= 0; what AppendBatch requires.
void AppendEveryNth(const Batch& from, int64_t first, int64_t every, int64_t offset, Batch* to);

// Sets `to` to examples [begin, end) of `from`, in order.
// REQUIRES: 0 <= begin <= end <= from.size.
void SliceBatch(const Batch& from, int64_t begin, int64_t end, Batch* to);

}  // namespace ember::io
