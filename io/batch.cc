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

void AppendEveryNth(const Batch& from, int64_t first, int64_t every, int64_t offset, Batch* to) {
  CHECK(every >= 1 && 0 <= offset && offset < every && first >= 0)
      << "AppendEveryNth: offset " << offset << " of every " << every << " from " << first;
  const int64_t L = from.num_labels, D = from.num_dense, S = from.num_slots;
  // The first example of `from` at `offset` modulo `every`.
  for (int64_t i = (offset - first % every + every) % every; i < from.size; i += every) {
    to->labels.insert(to->labels.end(), from.labels.begin() + i * L,
                      from.labels.begin() + (i + 1) * L);
    to->dense.insert(to->dense.end(), from.dense.begin() + i * D, from.dense.begin() + (i + 1) * D);
    const int64_t begin = from.offsets[i * S], end = from.offsets[(i + 1) * S];
    const int64_t shift = static_cast<int64_t>(to->keys.size()) - begin;
    to->keys.insert(to->keys.end(), from.keys.begin() + begin, from.keys.begin() + end);
    for (int64_t bag = 1; bag <= S; ++bag) to->offsets.push_back(from.offsets[i * S + bag] + shift);
    ++to->size;
  }
}

void SliceBatch(const Batch& from, int64_t begin, int64_t end, Batch* to) {
  CHECK(0 <= begin && begin <= end && end <= from.size) << "SliceBatch: rows [" << begin << ", "
                                                        << end << ") of " << from.size;
  to->Clear(from.num_dense, from.num_slots, from.num_labels);
  to->labels.assign(from.labels.begin() + begin * from.num_labels,
                    from.labels.begin() + end * from.num_labels);
  to->dense.assign(from.dense.begin() + begin * from.num_dense,
                   from.dense.begin() + end * from.num_dense);
  const int64_t first = from.offsets[begin * from.num_slots];
  const int64_t last = from.offsets[end * from.num_slots];
  to->keys.assign(from.keys.begin() + first, from.keys.begin() + last);
  to->offsets.resize(static_cast<size_t>((end - begin) * from.num_slots + 1));
  for (int64_t bag = 0; bag <= (end - begin) * from.num_slots; ++bag) {
    to->offsets[bag] = from.offsets[begin * from.num_slots + bag] - first;
  }
  to->size = end - begin;
}

}  // namespace ember::io
