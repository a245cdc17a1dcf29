#include "io/rank_slice_source.h"

#include <glog/logging.h>

namespace ember::io {

RankSliceBatchSource::RankSliceBatchSource(BatchSource* global, int rank, int ranks)
    : global_(global), rank_(rank), ranks_(ranks) {
  CHECK(0 <= rank && rank < ranks) << "rank " << rank << " of " << ranks;
}

Result<bool> RankSliceBatchSource::Next(Batch* out) {
  EMBER_ASSIGN_OR_RETURN(const bool more, global_->Next(&whole_));
  if (!more) return false;
  const int64_t b = whole_.size;
  SliceBatch(whole_, rank_ * b / ranks_, (rank_ + 1) * b / ranks_, out);
  return true;
}

}  // namespace ember::io
