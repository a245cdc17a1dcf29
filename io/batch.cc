#include "io/batch.h"

#include <glog/logging.h>

namespace ember::io {

void Batch::Clear(int num_dense_features, int num_categorical_slots, int labels_per_example) {
  size = 0;
  num_dense = num_dense_features;
  num_slots = num_categorical_slots;
  num_labels = labels_per_example;
  labels.clear();
  dense.clear();
  offsets.assign(1, 0);
  keys.clear();
}

void AppendBatch(const Batch& from, Batch* to) {
  CHECK_EQ(from.num_dense, to->num_dense) << "AppendBatch requires the same dense width";
  CHECK_EQ(from.num_slots, to->num_slots) << "AppendBatch requires the same slot count";
  CHECK_EQ(from.num_labels, to->num_labels) << "AppendBatch requires the same label count";
  CHECK(!to->offsets.empty()) << "AppendBatch requires a cleared destination";
  if (from.size == 0) return;
  to->labels.insert(to->labels.end(), from.labels.begin(), from.labels.end());
  to->dense.insert(to->dense.end(), from.dense.begin(), from.dense.end());
  const int64_t shift = static_cast<int64_t>(to->keys.size()) - from.offsets.front();
  to->keys.insert(to->keys.end(), from.keys.begin() + from.offsets.front(),
                  from.keys.begin() + from.offsets.back());
  to->offsets.reserve(to->offsets.size() + from.offsets.size() - 1);
  for (size_t bag = 1; bag < from.offsets.size(); ++bag) {
    to->offsets.push_back(from.offsets[bag] + shift);
  }
  to->size += from.size;
}

}  // namespace ember::io
