#include "io/internal/dataset_position.h"

#include <numeric>
#include <string>
#include <utility>

#include "core/json.h"
#include "core/random.h"

namespace ember::io::internal {
namespace {

// The stream of the epoch permutations (seed, kShuffleStream + epoch).
constexpr uint64_t kShuffleStream = 0x5eed0000u;

constexpr auto kDatasetPositionFields = [](auto& p, auto&& field) {
  field("dataset", p.dataset);
  field("batch_size", p.batch_size);
  field("shuffle", p.shuffle);
  field("seed", p.seed);
  field("epoch", p.epoch);
  field("next", p.next);
};

}  // namespace

void to_json(Json& j, const DatasetPosition& p) { WriteJsonFields(j, p, kDatasetPositionFields); }
void from_json(const Json& j, DatasetPosition& p) { ReadJsonFields(j, p, kDatasetPositionFields); }

std::string DatasetPositionText(const DatasetPosition& position) {
  return JsonText(Json(position)) + "\n";
}

Result<DatasetPosition> ParseDatasetPosition(std::string_view text) {
  Result<Json> json = ParseJsonText(std::string(text));
  if (!json.ok()) {
    return Status::InvalidArgument("data position ", text, ": ", json.status().message());
  }
  Result<DatasetPosition> position = FromJson<DatasetPosition>(*json);
  if (!position.ok()) {
    return Status::InvalidArgument("data position ", text, ": not a position of in-memory data (",
                                   position.status().message(), ")");
  }
  return position;
}

Result<DatasetPosition> CheckDatasetPosition(std::string_view text, int64_t examples,
                                             const DatasetBatchSourceOptions& options) {
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("data position ", text, ": ", why);
  };
  EMBER_ASSIGN_OR_RETURN(DatasetPosition position, ParseDatasetPosition(text));
  if (position.dataset != examples) {
    return bad("it is of data with " + std::to_string(position.dataset) + " examples, this has " +
               std::to_string(examples));
  }
  if (position.batch_size != options.batch_size) {
    return bad("it is of batches of " + std::to_string(position.batch_size) + ", these are of " +
               std::to_string(options.batch_size));
  }
  if (position.shuffle != options.shuffle || (options.shuffle && position.seed != options.seed)) {
    return bad("it is of another order (shuffle or seed differ)");
  }
  // Before the first batch: epoch -1 with the whole (empty) epoch behind.
  const bool start = position.epoch == -1 && position.next == examples;
  if (!start && (position.epoch < 0 || position.next < 0 || position.next > examples)) {
    return bad("epoch " + std::to_string(position.epoch) + ", example " +
               std::to_string(position.next) + " is no place in this data");
  }
  if (position.epoch >= options.num_epochs) {
    // Past this source's last epoch (a job resumed with fewer epochs): done.
    position.epoch = options.num_epochs - 1;
    position.next = examples;
  }
  return position;
}

void EpochOrder(int64_t examples, bool shuffle, uint64_t seed, int64_t epoch,
                std::vector<int64_t>* order) {
  order->resize(examples);
  std::iota(order->begin(), order->end(), 0);
  if (!shuffle) return;
  RandomStream random(seed, kShuffleStream + static_cast<uint64_t>(epoch));
  for (int64_t i = examples - 1; i > 0; --i) {
    std::swap((*order)[i], (*order)[random.NextBelow(static_cast<uint64_t>(i + 1))]);
  }
}

}  // namespace ember::io::internal
