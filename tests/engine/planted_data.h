#pragma once

// Data drawn from a planted model for the engine's learning tests: written as
// Criteo TSV to a temporary file, read back, and split 80/20 into training
// and test examples, with the AUC ceilings the generator reports.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include <glog/logging.h>

#include "io/criteo.h"
#include "io/dataset.h"
#include "io/synthetic.h"

namespace ember::test {

struct PlantedData {
  io::Dataset train;  // the first 80% of the examples
  io::Dataset test;   // the last 20%
  double bayes_auc = 0;
  double blind_auc = 0;  // SyntheticInfo::cluster_blind_auc
};

// `synthetic`'s examples; `tag` names the temporary file (with the process
// id), which is removed. Dies if writing or reading fails.
inline PlantedData GeneratePlantedData(const io::SyntheticOptions& synthetic,
                                       const std::string& tag) {
  PlantedData p;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ember_" + tag + "_" + std::to_string(::getpid()) + ".tsv"))
                               .string();
  auto info = io::WriteSyntheticCriteo(path, synthetic);
  CHECK(info.ok()) << info.status();
  auto all = io::ReadCriteoFiles({path}, io::CriteoReadOptions{});
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".meta.json");
  CHECK(all.ok()) << all.status();
  const int64_t split = all->size() * 8 / 10;
  p.train = all->Slice(0, split);
  p.test = all->Slice(split, all->size());
  p.bayes_auc = info->bayes_auc;
  p.blind_auc = info->cluster_blind_auc;
  return p;
}

}  // namespace ember::test
