#include "engine/model.h"

#include <utility>

#include "engine/model_zoo.h"

namespace ember::engine {

ops::DenseModelOptions DenseModelOptionsOf(const ModelOptions& options) {
  ops::DenseModelOptions dense;
  dense.seed = options.seed;
  dense.device = options.device;
  dense.precision = options.precision;
  dense.cpu_row_shards = options.cpu_row_shards;
  return dense;
}

Result<std::unique_ptr<DenseModel>> NewDenseModel(const ModelOptions& options) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ops::Graph> graph,
                         BuildModelGraph(options, ops::DefaultOpRegistry()));
  return DenseModel::Create(std::move(graph), DenseModelOptionsOf(options));
}

}  // namespace ember::engine
