#pragma once

// StreamReader: mini-batches from input too large for memory, read in a
// stream with bounded memory, shuffled under a seed, sharded across workers,
// and resumable exactly from a small position.
//
// Pieces. The input (text files of one TextFormat, or columnar files) is
// indexed when the reader opens: every file is cut into pieces, ~piece_bytes
// of complete lines (columnar: piece_rows rows), by a rule that depends only
// on the bytes and the piece size (io/internal/stream_index.h), never on the
// thread count. The index costs one pass over the input: a memchr scan of
// plain files, in parallel over files and byte ranges, and one decompression
// of each gzip file. It is kept for the reader's lifetime (every epoch).
// Pieces are the unit of parsing, of shuffling and of sharding.
//
// Order. In epoch e the pieces come in file order, the files permuted by
// (seed, e) with shuffle_files, and within a plain file in file order or
// permuted by (seed, e, file) with shuffle_pieces. A gzip file cannot be
// split by byte range: its pieces always keep their order and are
// decompressed front to back by one stream, which passes over the pieces of
// other shards (so sharded gzip input is decompressed by every shard that has
// a piece of it; many gzip files shard cheaply, a single one does not) and is
// closed after the shard's last piece of the file in the epoch, or when a
// Seek leaves it: only the gzip files being read are open. The
// records of a piece keep their line order. With shuffle_buffer N > 0 they
// then pass a buffer of N records (io/internal/shuffle_buffer.h): reservoir
// style, record t of the epoch replaces a record at a random slot that is
// returned; at the end of the epoch the buffer is emptied in random order.
// The buffer is emptied at every epoch end: no record crosses an epoch.
//
// Sharding. Shard i of n takes the i-th of n contiguous runs of the epoch's
// piece order (io/internal/epoch_plan.h), so that together the shards read
// every piece, hence every record, exactly once per epoch.
//
// Equal shards. Collective training hangs when workers run different numbers
// of steps, so with num_shards > 1 and equal_shards (the default) every
// shard returns exactly T_e records in epoch e, where T_e is the smallest
// number of lines (columnar: rows) that any shard has in e, known from the
// index before the epoch starts; the batch count is then the same on every
// shard (ceil(T_e / batch_size), or floor with drop_last). A shard with more
// lines stops after T_e records and leaves the rest of its epoch unread:
// its lines less T_e are counted as dropped_for_equal_shards. A shard whose
// bad lines leave it G < T_e good records reads its pieces again from the
// start of its sequence (the same pieces, in the same order) until T_e
// records went in: it returns each of its G good records once and T_e - G
// repeats, counted as padded_for_equal_shards, and drops nothing. The
// repeats pass the shuffle buffer like the first pass, and the buffer is
// emptied once T_e records went in. With
// equal_shards false, or one shard, a reader returns every record of its
// pieces and the batch counts of shards may differ.
//
// Determinism. Pieces are parsed on `threads` threads, ahead of the reader
// in a bounded window, and consumed in sequence order; the batches, the
// bad-line report and every count are the same for any thread count and
// queue depth.
//
// Resume. position() is a small value (StreamPosition, a JSON string when
// serialised) that a reader over the same input with the same options turns
// back into the exact stream with Seek: the batches after it are the ones an
// uninterrupted reader returns. Without a shuffle buffer Seek re-reads the
// one piece it stopped in. With one, the buffer's content is rebuilt by
// replay: its slot choices depend only on the record count, so writing again
// the records from the oldest one still in the buffer restores it; that is
// about N ln N records (N = shuffle_buffer) read again.
//
// Bad lines (text): parsed and counted per piece as ReadTextFiles does
// (same reasons, same "path:line: reason (got ...)" examples with line
// numbers in the file), added to bad_lines() when the reader reaches the
// piece, so the report is the same for any thread count. It counts every
// line read, over all epochs. kFail: Next fails with InvalidArgument at the
// first bad line reached. kSkip: Next fails with InvalidArgument when
// bad_lines / lines_read > max_bad_ratio, checked at each piece once 1000
// lines were read and at the end of each epoch.
//
// Errors from Open: as ReadTextFiles (text) or OpenColumnar (columnar), a
// truncated gzip file as DataLoss naming it; InvalidArgument for bad
// options, columnar files of different shapes, or fewer pieces than shards.
// From Next: read errors (IOError, DataLoss naming the file; DataLoss for a
// file that changed since the index) and the bad-line failures above, when
// the reader reaches the piece.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/batch.h"
#include "io/batch_source.h"
#include "io/columnar.h"
#include "io/dataset.h"
#include "io/text_format.h"
#include "io/text_reader.h"

namespace ember::io {

namespace internal {
struct InputIndex;
struct EpochPlan;
class PiecePipeline;
class ShuffleBuffer;
struct ParsedPiece;
}  // namespace internal

struct StreamReaderOptions {
  // Examples per batch. Default: 1024.
  int64_t batch_size = 1024;
  // Drop the last batch of an epoch when it is short instead of returning it.
  bool drop_last = false;
  // Passes over the input. Default: 1.
  int64_t num_epochs = 1;
  // Seed of file order, piece order and the shuffle buffer.
  uint64_t seed = 1;
  // Permute the files in each epoch.
  bool shuffle_files = false;
  // Permute the pieces of each plain (not gzip) file in each epoch.
  bool shuffle_pieces = false;
  // Records in the shuffle buffer; 0 disables it. Memory: N records.
  int64_t shuffle_buffer = 0;
  // This reader is shard `shard_index` of `num_shards`.
  int num_shards = 1;
  int shard_index = 0;
  // With num_shards > 1: every shard returns the same number of records per
  // epoch (see the top of this file).
  bool equal_shards = true;
  // Parser threads; <= 0 means every hardware thread.
  int threads = 0;
  // Pieces being parsed or parsed ahead of the reader; <= 0 means 2 x threads.
  // Memory: about (queue_depth + threads) pieces and their examples.
  int queue_depth = 0;
  // Text: bytes per piece. Default: 1 MiB. It fixes the pieces, hence the
  // order of a shuffled or sharded stream (not the thread count). Any size
  // >= 1; a huge one makes one piece of each file (lines too long aside).
  int64_t piece_bytes = int64_t{1} << 20;
  // Columnar: rows per piece. Default: 4096 (about 1 MiB of Criteo rows).
  int64_t piece_rows = 4096;
  // Text: what a bad line does, and the ratio of bad lines that fails the
  // read under kSkip (as TextReadOptions).
  BadLinePolicy bad_lines = BadLinePolicy::kSkip;
  double max_bad_ratio = 0.01;
};

// Where a StreamReader is, between two calls of Next. The first group of
// fields says which input and options it belongs to; Seek compares them with
// the reader's. The rest is the reader's state; see StreamReader.
struct StreamPosition {
  // The input: "columnar" or the text format's name; its files' count and a
  // fingerprint of their names (without directories), sizes and line or row
  // counts, in order.
  std::string input;
  int64_t num_files = 0;
  uint64_t files_fingerprint = 0;
  int64_t piece_size = 0;  // piece_bytes or piece_rows.
  uint64_t seed = 0;
  bool shuffle_files = false;
  bool shuffle_pieces = false;
  int64_t shuffle_buffer = 0;
  int num_shards = 1;
  int shard_index = 0;
  bool equal_shards = true;
  int64_t batch_size = 0;
  bool drop_last = false;
  // "skip" or "fail": under kFail a piece is parsed up to its first bad
  // line, so a replay needs the same policy.
  std::string bad_line_policy = "skip";

  // The epoch being read (the next one when !epoch_started).
  int64_t epoch = 0;
  bool epoch_started = false;
  int64_t batches_in_epoch = 0;  // Batches returned in `epoch`.
  int64_t records_out = 0;       // Records returned in `epoch`.
  // Input: the sequence index of the piece the last record came from (-1
  // before the first) and its rows taken; pieces whose bad lines are
  // counted; records taken in the epoch.
  int64_t piece = -1;
  int64_t piece_row = 0;
  int64_t counted_through = -1;
  int64_t records_in = 0;
  bool input_done = false;
  // Padding for equal shards: going round the pieces again, after a first
  // pass that gave first_pass_records.
  bool cycling = false;
  int64_t first_pass_records = 0;
  // Shuffle buffer: the origin of its oldest live record (replay_piece -1:
  // empty) and the drain steps taken.
  int64_t replay_piece = -1;
  int64_t replay_row = 0;
  int64_t replay_input = 0;
  int64_t drain_step = 0;
  // The epoch of the last batch returned and its index there (-1: none).
  int64_t last_epoch = -1;
  int64_t last_batch_in_epoch = -1;
  // Totals so far.
  int64_t records_delivered = 0;
  int64_t batches_delivered = 0;
  int64_t padded_for_equal_shards = 0;
  int64_t dropped_for_equal_shards = 0;
  BadLineReport bad_lines;

  // One line of JSON.
  std::string Serialize() const;
  // InvalidArgument naming the field for text that Serialize did not write.
  static Result<StreamPosition> Parse(std::string_view text);
};

// Counts over the reader's life (all epochs, from a Seek's position on).
struct StreamStats {
  int64_t records_delivered = 0;  // In returned batches, repeats included.
  int64_t batches_delivered = 0;
  // Equal shards: records read again from a short shard's pieces to reach
  // the common count, and lines of longer shards left unread.
  int64_t padded_for_equal_shards = 0;
  int64_t dropped_for_equal_shards = 0;
  BadLineReport bad_lines;
};

// Thread safety: one thread at a time calls its methods; the parser threads
// are its own and stopped by the destructor.
class StreamReader final : public BatchSource {
 public:
  // Text files of `format` (borrowed during the call only).
  static Result<std::unique_ptr<StreamReader>> OpenText(const std::vector<std::string>& paths,
                                                        const TextFormat& format,
                                                        const StreamReaderOptions& options);
  // Columnar files, all of one shape.
  static Result<std::unique_ptr<StreamReader>> OpenColumnar(
      const std::vector<std::string>& paths, const StreamReaderOptions& options,
      const ColumnarReadOptions& columnar = {});
  ~StreamReader();
  StreamReader(const StreamReader&) = delete;
  StreamReader& operator=(const StreamReader&) = delete;

  // Fills `out` (cleared first, capacity kept) with the next batch and
  // returns true; false after the last epoch. A batch holds batch_size
  // records except the last of an epoch, which may be short (or is dropped
  // with drop_last); batches never span epochs. Errors: see the top of the
  // file; after one the reader's state is unspecified (Seek resets it).
  Result<bool> Next(Batch* out) override;
  // The epoch of the last batch returned, and its index in that epoch.
  int64_t epoch() const override { return last_epoch_; }
  int64_t batch_in_epoch() const { return last_batch_in_epoch_; }
  // Records this shard returns in `epoch` when known in advance (equal
  // shards with num_shards > 1), else -1.
  int64_t EpochRecords(int64_t epoch) const;
  // Lines (columnar: rows) of this shard's pieces in `epoch`: the records it
  // returns there without equal shards, less its bad lines.
  int64_t EpochLines(int64_t epoch) const;
  // Batches over all epochs from the start: exact with equal shards or
  // without bad lines, an upper bound otherwise.
  int64_t EstimatedBatches() const override;
  int num_labels() const override;
  int num_dense() const override;
  int num_slots() const override;

  // The position after the last batch returned. Costs a scan of the shuffle
  // buffer (its oldest record), so take it at checkpoints, not every batch.
  StreamPosition position() const;
  // Continues from `position`, as if this reader had stopped there.
  // InvalidArgument naming the first field that differs if it belongs to
  // other input or options (threads, queue depth, num_epochs and
  // max_bad_ratio may differ); DataLoss "the position does not fit the
  // input" if its piece or counts lie outside the shard's epoch (a position
  // edited by hand). Errors of the replay are Next's.
  Status Seek(const StreamPosition& position);
  // BatchSource's resume: position().Serialize() and Seek(Parse(text)).
  Result<std::string> ResumePosition() const override;
  Status ResumeFrom(std::string_view position) override;

  const BadLineReport& bad_lines() const { return report_; }
  StreamStats stats() const;
  TextLayout layout() const;
  int64_t num_pieces() const;

 private:
  StreamReader(std::unique_ptr<internal::InputIndex> index, const StreamReaderOptions& options);
  static Result<std::unique_ptr<StreamReader>> FromIndex(
      std::unique_ptr<internal::InputIndex> index, const StreamReaderOptions& options);
  // Sets up epoch_ with nothing read yet; StartEpoch also points the
  // pipeline at its first piece.
  void ResetEpoch();
  void StartEpoch();
  Status FinishEpoch();
  Result<bool> Fill(Batch* out);
  Result<bool> FillShuffled(Batch* out);
  Result<bool> TakeInput();
  Status PullPiece();
  Status CountBadLines(const internal::ParsedPiece& piece);
  Status CheckBadRatio() const;
  Status CheckMatches(const StreamPosition& position) const;
  Status Replay(const StreamPosition& position);
  void EnsurePipelineAt(int64_t epoch, int64_t index, bool cycle);
  void RecyclePiece();
  bool equal_shards() const;

  std::unique_ptr<internal::InputIndex> index_;
  const StreamReaderOptions options_;
  std::unique_ptr<internal::PiecePipeline> pipeline_;
  std::unique_ptr<internal::ShuffleBuffer> shuffle_;
  int64_t pieces_per_shard_ = 0;

  // Epoch state.
  int64_t epoch_ = 0;
  bool epoch_started_ = false;
  int64_t target_ = -1;  // Records to return in the epoch; -1: all there are.
  int64_t shard_lines_ = 0;
  int64_t batches_in_epoch_ = 0;
  int64_t records_out_ = 0;
  int64_t records_in_ = 0;
  bool input_done_ = false;
  bool cycling_ = false;
  int64_t first_pass_records_ = 0;
  int64_t bad_lines_at_epoch_start_ = 0;  // For the warning at its end.
  // The piece being taken from and the next to pull.
  std::unique_ptr<internal::ParsedPiece> piece_;
  int64_t piece_index_ = -1;
  int64_t piece_row_ = 0;
  int64_t counted_through_ = -1;
  // What the pipeline hands out next, to tell whether it must restart.
  int64_t pipeline_epoch_ = -1;
  int64_t pipeline_index_ = 0;
  bool pipeline_cycle_ = false;

  int64_t last_epoch_ = -1;
  int64_t last_batch_in_epoch_ = -1;
  StreamStats totals_;  // Without bad_lines, which are report_.
  BadLineReport report_;
};

}  // namespace ember::io
