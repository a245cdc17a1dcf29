#include "engine/model_hash.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <numeric>
#include <vector>

#include "core/checksum.h"
#include "embedding/checkpoint.h"
#include "embedding/stored_rows.h"

namespace ember::engine {
namespace {

void HashTensor(const Tensor& tensor, Fnv1a64Words* hash) {
  const int64_t count = tensor.defined() ? tensor.numel() : 0;
  hash->Update(reinterpret_cast<const char*>(&count), sizeof(count));
  if (count > 0) hash->Update(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
}

}  // namespace

Result<uint64_t> HashTrainedModel(DenseModel& model, embedding::EmbeddingTable& table) {
  Fnv1a64Words hash;
  EMBER_ASSIGN_OR_RETURN(const std::vector<Parameter> parameters, model.ParametersToHost());
  for (const Parameter& p : parameters) {
    HashTensor(p.value, &hash);
    HashTensor(p.slot.first_moment, &hash);
    HashTensor(p.slot.second_moment, &hash);
  }
  embedding::StoredRows& stored = table.stored_rows();
  const int64_t row_floats = stored.row_floats();
  std::vector<embedding::Key> keys;
  std::vector<float> rows;
  EMBER_RETURN_IF_ERROR(stored.Scan([&](embedding::Key key, const float* row) {
    keys.push_back(key);
    rows.insert(rows.end(), row, row + row_floats);
    return Status::OK();
  }));
  std::vector<int64_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  for (const int64_t i : order) {
    hash.Update(reinterpret_cast<const char*>(&keys[i]), sizeof(embedding::Key));
    hash.Update(reinterpret_cast<const char*>(rows.data() + i * row_floats),
                row_floats * sizeof(float));
  }
  return hash.Digest();
}

std::string ModelHashHex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, hash);
  return text;
}

}  // namespace ember::engine
