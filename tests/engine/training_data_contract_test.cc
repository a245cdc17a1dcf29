// The BatchSource contract (tests/io/batch_source_contract.h) for the
// engine's training source of data in memory (engine/training_data.h), on
// one rank and as rank r of 2 (a group of in-process communicators: the
// source asks it only for the rank and size).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/in_process_communicator.h"
#include "engine/training_data.h"
#include "tests/io/batch_source_contract.h"

namespace ember::test {
namespace {

BatchSourceEntry TrainingSourceEntry(const std::string& name, int ranks) {
  BatchSourceEntry entry;
  entry.name = name;
  entry.ranks = ranks;
  entry.epochs = 2;
  entry.in_memory = true;
  entry.make = [ranks, epochs = entry.epochs](const SourceRequest& request) -> Result<MadeSource> {
    engine::TrainOptions options;
    options.batch_size = request.other_options ? 4 : 5;
    options.epochs = static_cast<int>(epochs);
    options.shuffle = true;
    options.seed = 3;
    MadeSource made;
    if (ranks > 1) {
      EMBER_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> group,
                             NewInProcessCommunicators(ranks));
      auto owned = std::make_shared<std::vector<std::unique_ptr<Communicator>>>(std::move(group));
      Communicator* comm = (*owned)[static_cast<size_t>(request.rank)].get();
      options.ranks = {comm, comm, comm, comm};
      made.parts.push_back(std::move(owned));
    }
    EMBER_ASSIGN_OR_RETURN(made.source,
                           engine::NewDatasetTrainingSource(request.data->examples, options));
    return made;
  };
  return entry;
}

std::vector<BatchSourceEntry> EngineBatchSources() {
  return {TrainingSourceEntry("DatasetTrainingSource", 1),
          TrainingSourceEntry("DatasetTrainingSourceOfTwoRanks", 2)};
}

INSTANTIATE_TEST_SUITE_P(Engine, BatchSourceContractTest, ::testing::ValuesIn(EngineBatchSources()),
                         BatchSourceName);

}  // namespace
}  // namespace ember::test
