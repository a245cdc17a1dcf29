#pragma once

// A fingerprint of a trained model's whole state, for checking that two runs
// trained the same model bit for bit (an interrupted and resumed job against
// an uninterrupted one: tools/crashtest). Logical, not physical: it covers
// what a checkpoint saves, independent of how the table stores it.

#include <cstdint>
#include <string>

#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/model.h"

namespace ember::engine {

// Fnv1a64Words (core/checksum.h) over, in order: every dense
// parameter's value and optimizer state (parameters() order, host copies),
// then every embedding row (key, then its row_floats floats as
// StoredRows::Scan gives them: weights, optimizer state, metadata) in
// increasing key order.
// REQUIRES: the model and the table are quiescent (no step running).
// Errors: the table's Scan and the model's copy to the host.
Result<uint64_t> HashTrainedModel(DenseModel& model, embedding::EmbeddingTable& table);

// The hash as 16 lowercase hex digits.
std::string ModelHashHex(uint64_t hash);

}  // namespace ember::engine
