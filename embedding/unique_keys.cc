#include "embedding/unique_keys.h"

#include "core/random.h"

namespace ember::embedding {

void UniqueKeys(const std::vector<Key>& keys, std::vector<Key>* unique,
                std::vector<int64_t>* index) {
  unique->clear();
  index->resize(keys.size());
  size_t capacity = 16;
  while (capacity < keys.size() * 2) capacity <<= 1;
  const size_t mask = capacity - 1;
  // Slots hold 1 + the position in `unique`; 0 marks an empty slot, so every
  // key value, 0 included, is allowed.
  std::vector<int64_t> slots(capacity, 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    const Key key = keys[i];
    size_t slot = Mix64(key) & mask;
    while (true) {
      const int64_t entry = slots[slot];
      if (entry == 0) {
        unique->push_back(key);
        slots[slot] = static_cast<int64_t>(unique->size());
        (*index)[i] = static_cast<int64_t>(unique->size()) - 1;
        break;
      }
      if ((*unique)[entry - 1] == key) {
        (*index)[i] = entry - 1;
        break;
      }
      slot = (slot + 1) & mask;
    }
  }
}

}  // namespace ember::embedding
