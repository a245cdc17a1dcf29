#include "io/stream_reader.h"

#include <glog/logging.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "core/random.h"
#include "core/threads.h"
#include "io/internal/epoch_plan.h"
#include "io/internal/piece_pipeline.h"
#include "io/internal/shuffle_buffer.h"
#include "io/internal/stream_index.h"

namespace ember::io {
namespace {

using ::ember::internal::StrCat;
using internal::EpochPlan;
using internal::IndexedFile;
using internal::IndexedPiece;
using internal::InputIndex;
using internal::ParsedPiece;
using internal::PlanOptions;

// Keeps the shuffle buffer's random stream apart from the others.
constexpr uint64_t kShuffleStream = 0x73687566'666c6562ULL;
// Lines read before max_bad_ratio is checked at piece boundaries: a few bad
// lines at the start of a file are no reason to stop.
constexpr int64_t kMinLinesForRatio = 1000;

Status ValidateOptions(const StreamReaderOptions& options) {
  if (options.batch_size < 1) {
    return Status::InvalidArgument("batch_size must be >= 1, got ", options.batch_size);
  }
  if (options.num_epochs < 0) {
    return Status::InvalidArgument("num_epochs must be >= 0, got ", options.num_epochs);
  }
  if (options.shuffle_buffer < 0) {
    return Status::InvalidArgument("shuffle_buffer must be >= 0, got ", options.shuffle_buffer);
  }
  if (options.num_shards < 1) {
    return Status::InvalidArgument("num_shards must be >= 1, got ", options.num_shards);
  }
  if (options.shard_index < 0 || options.shard_index >= options.num_shards) {
    return Status::InvalidArgument("shard_index must be in [0, ", options.num_shards, "), got ",
                                   options.shard_index);
  }
  if (options.piece_bytes < 1 || options.piece_rows < 1) {
    return Status::InvalidArgument("piece_bytes and piece_rows must be >= 1, got ",
                                   options.piece_bytes, " and ", options.piece_rows);
  }
  if (!(options.max_bad_ratio >= 0.0)) {
    return Status::InvalidArgument("max_bad_ratio must be >= 0, got ", options.max_bad_ratio);
  }
  return Status::OK();
}

PlanOptions PlanOptionsOf(const StreamReaderOptions& options) {
  return PlanOptions{.seed = options.seed,
                     .shuffle_files = options.shuffle_files,
                     .shuffle_pieces = options.shuffle_pieces,
                     .num_shards = options.num_shards,
                     .shard_index = options.shard_index};
}

// Appends rows [begin, begin + count) of `from` (offsets from 0) to `to`.
void AppendRows(const Batch& from, int64_t begin, int64_t count, Batch* to) {
  const int num_labels = from.num_labels;
  const int num_dense = from.num_dense;
  const int num_slots = from.num_slots;
  to->labels.insert(to->labels.end(), from.labels.begin() + begin * num_labels,
                    from.labels.begin() + (begin + count) * num_labels);
  to->dense.insert(to->dense.end(), from.dense.begin() + begin * num_dense,
                   from.dense.begin() + (begin + count) * num_dense);
  const int64_t first = from.offsets[begin * num_slots];
  const int64_t last = from.offsets[(begin + count) * num_slots];
  const int64_t shift = static_cast<int64_t>(to->keys.size()) - first;
  to->keys.insert(to->keys.end(), from.keys.begin() + first, from.keys.begin() + last);
  const int64_t* offsets = from.offsets.data() + begin * num_slots + 1;
  const int64_t bags = count * num_slots;
  const size_t old_size = to->offsets.size();
  to->offsets.resize(old_size + bags);
  int64_t* out = to->offsets.data() + old_size;
  for (int64_t b = 0; b < bags; ++b) out[b] = offsets[b] + shift;
  to->size += count;
}

// The report's first example; a position made by hand may have bad lines
// without examples. (Not one conditional expression: its type would be a
// std::string copy, and the view would outlive it.)
std::string_view FirstExample(const BadLineReport& report) {
  if (report.first_examples.empty()) return "(none kept)";
  return report.first_examples.front();
}

std::string BadLineSummary(const BadLineReport& report) {
  std::string reasons;
  for (const auto& [reason, count] : report.by_reason) {
    reasons += StrCat(reasons.empty() ? "" : ", ", reason, ": ", count);
  }
  return reasons;
}

}  // namespace

StreamReader::StreamReader(std::unique_ptr<InputIndex> index, const StreamReaderOptions& options)
    : index_(std::move(index)), options_(options) {}

StreamReader::~StreamReader() = default;

Result<std::unique_ptr<StreamReader>> StreamReader::OpenText(const std::vector<std::string>& paths,
                                                             const TextFormat& format,
                                                             const StreamReaderOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateOptions(options));
  ThreadArena arena(options.threads);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<InputIndex> index,
                         internal::IndexTextFiles(paths, format, options.piece_bytes, &arena));
  return FromIndex(std::move(index), options);
}

Result<std::unique_ptr<StreamReader>> StreamReader::OpenColumnar(
    const std::vector<std::string>& paths, const StreamReaderOptions& options,
    const ColumnarReadOptions& columnar) {
  EMBER_RETURN_IF_ERROR(ValidateOptions(options));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<InputIndex> index,
                         internal::IndexColumnarFiles(paths, options.piece_rows, columnar));
  return FromIndex(std::move(index), options);
}

Result<std::unique_ptr<StreamReader>> StreamReader::FromIndex(std::unique_ptr<InputIndex> index,
                                                              const StreamReaderOptions& options) {
  const int64_t pieces = static_cast<int64_t>(index->pieces.size());
  if (options.num_shards > 1 && pieces < options.num_shards) {
    return Status::InvalidArgument("the input has ", pieces, " pieces, too few for ",
                                   options.num_shards,
                                   " shards; use smaller pieces or fewer shards");
  }
  std::unique_ptr<StreamReader> reader(new StreamReader(std::move(index), options));
  const int threads = options.threads > 0 ? options.threads : HardwareThreads();
  internal::PipelineOptions pipeline;
  pipeline.plan = PlanOptionsOf(options);
  pipeline.num_epochs = options.num_epochs;
  pipeline.stop_at_bad_line = options.bad_lines == BadLinePolicy::kFail;
  pipeline.threads = threads;
  pipeline.depth = options.queue_depth > 0 ? options.queue_depth : 2 * threads;
  reader->pipeline_ = std::make_unique<internal::PiecePipeline>(reader->index_.get(), pipeline);
  if (options.shuffle_buffer > 0) {
    reader->shuffle_ =
        std::make_unique<internal::ShuffleBuffer>(options.shuffle_buffer, reader->index_->layout);
  }
  reader->pieces_per_shard_ =
      internal::PiecesPerShard(pieces, options.num_shards, options.shard_index);
  return reader;
}

bool StreamReader::equal_shards() const { return options_.equal_shards && options_.num_shards > 1; }

int64_t StreamReader::EpochRecords(int64_t epoch) const {
  if (!equal_shards()) return -1;
  return internal::PlanEpoch(*index_, PlanOptionsOf(options_), epoch).min_shard_lines;
}

int64_t StreamReader::EpochLines(int64_t epoch) const {
  return internal::PlanEpoch(*index_, PlanOptionsOf(options_), epoch).lines;
}

int64_t StreamReader::EstimatedBatches() const {
  int64_t batches = 0;
  for (int64_t e = 0; e < options_.num_epochs; ++e) {
    const internal::EpochPlan plan = internal::PlanEpoch(*index_, PlanOptionsOf(options_), e);
    const int64_t records = equal_shards() ? plan.min_shard_lines : plan.lines;
    // Rounded up without records + batch_size - 1, which overflows for a huge batch.
    const bool short_batch = !options_.drop_last && records % options_.batch_size != 0;
    batches += records / options_.batch_size + (short_batch ? 1 : 0);
  }
  return batches;
}

int StreamReader::num_labels() const { return index_->layout.num_labels; }
int StreamReader::num_dense() const { return index_->layout.num_dense; }
int StreamReader::num_slots() const { return index_->layout.num_slots; }

TextLayout StreamReader::layout() const { return index_->layout; }

int64_t StreamReader::num_pieces() const { return static_cast<int64_t>(index_->pieces.size()); }

StreamStats StreamReader::stats() const {
  StreamStats stats = totals_;
  stats.bad_lines = report_;
  return stats;
}

void StreamReader::RecyclePiece() {
  if (piece_ != nullptr) pipeline_->Recycle(std::move(piece_));
}

void StreamReader::ResetEpoch() {
  const EpochPlan plan = internal::PlanEpoch(*index_, PlanOptionsOf(options_), epoch_);
  shard_lines_ = plan.lines;
  target_ = equal_shards() ? plan.min_shard_lines : -1;
  epoch_started_ = true;
  batches_in_epoch_ = 0;
  records_out_ = 0;
  records_in_ = 0;
  input_done_ = false;
  cycling_ = false;
  first_pass_records_ = 0;
  RecyclePiece();
  piece_index_ = -1;
  piece_row_ = 0;
  counted_through_ = -1;
  bad_lines_at_epoch_start_ = report_.bad_lines;
  if (shuffle_ != nullptr) {
    shuffle_->Reset(HashCombine(
        HashCombine(options_.seed, kShuffleStream),
        HashCombine(static_cast<uint64_t>(epoch_), static_cast<uint64_t>(options_.shard_index))));
  }
}

void StreamReader::StartEpoch() {
  ResetEpoch();
  EnsurePipelineAt(epoch_, 0, false);
}

void StreamReader::EnsurePipelineAt(int64_t epoch, int64_t index, bool cycle) {
  if (pipeline_epoch_ == epoch && pipeline_index_ == index && pipeline_cycle_ == cycle) return;
  pipeline_->Restart(internal::PipelineCursor{epoch, index, cycle});
  pipeline_epoch_ = epoch;
  pipeline_index_ = index;
  pipeline_cycle_ = cycle;
}

Status StreamReader::FinishEpoch() {
  if (target_ >= 0) {
    // A shard that pads read every line of its pieces: it drops none.
    if (cycling_) {
      totals_.padded_for_equal_shards += records_in_ - first_pass_records_;
    } else {
      totals_.dropped_for_equal_shards += std::max<int64_t>(0, shard_lines_ - target_);
    }
  }
  RecyclePiece();
  epoch_started_ = false;
  ++epoch_;
  if (report_.bad_lines > bad_lines_at_epoch_start_) {
    LOG(WARNING) << "Epoch " << epoch_ - 1 << ": skipped "
                 << report_.bad_lines - bad_lines_at_epoch_start_ << " bad lines; "
                 << report_.bad_lines << " of " << report_.lines_read << " read so far ("
                 << BadLineSummary(report_) << "); first: " << FirstExample(report_);
  }
  return CheckBadRatio();
}

Status StreamReader::CheckBadRatio() const {
  if (report_.bad_lines == 0) return Status::OK();
  const double ratio =
      static_cast<double>(report_.bad_lines) / static_cast<double>(report_.lines_read);
  if (ratio <= options_.max_bad_ratio) return Status::OK();
  return Status::InvalidArgument("too many bad lines: ", report_.bad_lines, " of ",
                                 report_.lines_read, " (ratio ", ratio, " > max_bad_ratio ",
                                 options_.max_bad_ratio, "; ", BadLineSummary(report_),
                                 "); first: ", FirstExample(report_));
}

Status StreamReader::CountBadLines(const ParsedPiece& piece) {
  const ParsedLines& parsed = piece.parsed;
  const IndexedPiece& indexed = index_->pieces[piece.piece];
  const IndexedFile& file = index_->files[indexed.file];
  for (const BadLine& bad : parsed.examples) {
    const std::string where = StrCat(file.path, ":", indexed.first_line - 1 + bad.line, ": ",
                                     BadLineReasonName(bad.reason), " (got ", bad.got, ")");
    if (options_.bad_lines == BadLinePolicy::kFail) return Status::InvalidArgument(where);
    if (report_.first_examples.size() < kMaxBadLineExamples) {
      report_.first_examples.push_back(where);
    }
  }
  report_.lines_read += parsed.lines;
  report_.bad_lines += parsed.bad_lines;
  for (int reason = 0; reason < kNumBadLineReasons; ++reason) {
    if (parsed.by_reason[reason] > 0) {
      report_.by_reason[BadLineReasonName(static_cast<BadLineReason>(reason))] +=
          parsed.by_reason[reason];
    }
  }
  return report_.lines_read >= kMinLinesForRatio ? CheckBadRatio() : Status::OK();
}

Status StreamReader::PullPiece() {
  const int64_t next = piece_index_ + 1;
  std::unique_ptr<ParsedPiece> piece = pipeline_->Pop();
  CHECK(piece != nullptr && piece->epoch == epoch_ && piece->index == next)
      << "the pipeline hands out the pieces the reader asks for, in order";
  ++pipeline_index_;
  if (!pipeline_cycle_ && pipeline_index_ == pieces_per_shard_) {
    ++pipeline_epoch_;
    pipeline_index_ = 0;
  }
  RecyclePiece();
  piece_ = std::move(piece);
  piece_index_ = next;
  piece_row_ = 0;
  EMBER_RETURN_IF_ERROR(piece_->status);
  if (next <= counted_through_) return Status::OK();
  counted_through_ = next;
  return CountBadLines(*piece_);
}

// Makes piece_ hold a record at piece_row_; false when the epoch's input
// has ended.
Result<bool> StreamReader::TakeInput() {
  // Padding ends once the epoch's records have entered: a shuffle buffer is
  // then emptied, so that every record read comes out once.
  if (cycling_ && records_in_ >= target_) return false;
  int64_t pulled = 0;
  while (piece_ == nullptr || piece_row_ == piece_->parsed.rows.size) {
    const int64_t next = piece_index_ + 1;
    if (!cycling_ && next == pieces_per_shard_) {
      const int64_t buffered =
          shuffle_ != nullptr ? std::min(records_in_, shuffle_->capacity()) : 0;
      if (target_ < 0 || records_out_ + buffered >= target_) return false;
      // Bad lines left this shard short of the common count: go round again.
      if (records_in_ == 0) {
        return Status::InvalidArgument("shard ", options_.shard_index, " of ", options_.num_shards,
                                       " has no good records in epoch ", epoch_, " to return the ",
                                       target_, " records that every shard returns");
      }
      cycling_ = true;
      first_pass_records_ = records_in_;
      EnsurePipelineAt(epoch_, next, true);
    }
    // A round without a record: the first pass had none either, so the
    // position that said it had some was made up.
    if (cycling_ && ++pulled > pieces_per_shard_) {
      return Status::DataLoss("the position does not fit the input: epoch ", epoch_,
                              " has no good records to pad with");
    }
    EMBER_RETURN_IF_ERROR(PullPiece());
  }
  return true;
}

// Fills `out` in input order; false when the epoch ended first.
Result<bool> StreamReader::Fill(Batch* out) {
  while (out->size < options_.batch_size) {
    if (target_ >= 0 && records_out_ == target_) return false;
    EMBER_ASSIGN_OR_RETURN(const bool more, TakeInput());
    if (!more) {
      input_done_ = true;
      return false;
    }
    int64_t count =
        std::min(options_.batch_size - out->size, piece_->parsed.rows.size - piece_row_);
    if (target_ >= 0) count = std::min(count, target_ - records_out_);
    AppendRows(piece_->parsed.rows, piece_row_, count, out);
    piece_row_ += count;
    records_in_ += count;
    records_out_ += count;
  }
  return true;
}

// Fills `out` through the shuffle buffer; false when the epoch ended first.
Result<bool> StreamReader::FillShuffled(Batch* out) {
  internal::ShuffleBuffer& buffer = *shuffle_;
  while (out->size < options_.batch_size) {
    if (target_ >= 0 && records_out_ == target_) return false;
    if (!input_done_) {
      EMBER_ASSIGN_OR_RETURN(const bool more, TakeInput());
      if (more) {
        const int64_t t = records_in_++;
        const int64_t slot = buffer.SlotFor(t);
        if (t >= buffer.capacity()) {
          buffer.Emit(slot, out);
          ++records_out_;
        }
        buffer.Put(slot, piece_->parsed.rows, piece_row_, {piece_index_, piece_row_, t});
        ++piece_row_;
        continue;
      }
      input_done_ = true;
      buffer.StartDrain(std::min(records_in_, buffer.capacity()));
    }
    if (buffer.drained()) return false;
    buffer.Emit(buffer.NextDrainSlot(), out);
    ++records_out_;
  }
  return true;
}

Result<bool> StreamReader::Next(Batch* out) {
  const TextLayout& layout = index_->layout;
  while (true) {
    out->Clear(layout.num_dense, layout.num_slots, layout.num_labels);
    if (epoch_ >= options_.num_epochs) return false;
    if (!epoch_started_) StartEpoch();
    EMBER_ASSIGN_OR_RETURN(const bool full, shuffle_ != nullptr ? FillShuffled(out) : Fill(out));
    const int64_t epoch = epoch_;
    const int64_t batch = batches_in_epoch_++;
    if (!full) {
      EMBER_RETURN_IF_ERROR(FinishEpoch());
      if (out->size == 0 || options_.drop_last) continue;
    }
    last_epoch_ = epoch;
    last_batch_in_epoch_ = batch;
    totals_.records_delivered += out->size;
    ++totals_.batches_delivered;
    return true;
  }
}

StreamPosition StreamReader::position() const {
  StreamPosition p;
  p.input = index_->format_name;
  p.num_files = static_cast<int64_t>(index_->files.size());
  p.files_fingerprint = index_->fingerprint;
  p.piece_size = index_->piece_size;
  p.seed = options_.seed;
  p.shuffle_files = options_.shuffle_files;
  p.shuffle_pieces = options_.shuffle_pieces;
  p.shuffle_buffer = options_.shuffle_buffer;
  p.num_shards = options_.num_shards;
  p.shard_index = options_.shard_index;
  p.equal_shards = options_.equal_shards;
  p.batch_size = options_.batch_size;
  p.drop_last = options_.drop_last;
  p.bad_line_policy = options_.bad_lines == BadLinePolicy::kFail ? "fail" : "skip";

  p.epoch = epoch_;
  p.epoch_started = epoch_started_;
  if (epoch_started_) {
    p.batches_in_epoch = batches_in_epoch_;
    p.records_out = records_out_;
    p.piece = piece_index_;
    p.piece_row = piece_row_;
    p.counted_through = counted_through_;
    p.records_in = records_in_;
    p.input_done = input_done_;
    p.cycling = cycling_;
    p.first_pass_records = first_pass_records_;
    if (shuffle_ != nullptr) {
      const int64_t occupied = std::min(records_in_, shuffle_->capacity());
      const bool live = shuffle_->draining() ? !shuffle_->drained() : occupied > 0;
      if (live) {
        const internal::RecordOrigin oldest = shuffle_->OldestLive(occupied);
        p.replay_piece = oldest.piece;
        p.replay_row = oldest.row;
        p.replay_input = oldest.input;
      }
      p.drain_step = shuffle_->draining() ? shuffle_->drain_step() : 0;
    }
  }
  p.last_epoch = last_epoch_;
  p.last_batch_in_epoch = last_batch_in_epoch_;
  p.records_delivered = totals_.records_delivered;
  p.batches_delivered = totals_.batches_delivered;
  p.padded_for_equal_shards = totals_.padded_for_equal_shards;
  p.dropped_for_equal_shards = totals_.dropped_for_equal_shards;
  p.bad_lines = report_;
  return p;
}

Status StreamReader::CheckMatches(const StreamPosition& p) const {
  const StreamPosition mine = position();
  auto differs = [](const char* field, const auto& theirs, const auto& ours) {
    return Status::InvalidArgument("the position belongs to another reader: ", field, " is ",
                                   theirs, " in the position, ", ours, " in this reader");
  };
  if (p.input != mine.input) return differs("input format", p.input, mine.input);
  if (p.num_files != mine.num_files)
    return differs("the number of files", p.num_files, mine.num_files);
  if (p.files_fingerprint != mine.files_fingerprint) {
    return differs("the files' fingerprint (names, sizes, lines)", p.files_fingerprint,
                   mine.files_fingerprint);
  }
  if (p.piece_size != mine.piece_size) return differs("piece size", p.piece_size, mine.piece_size);
  if (p.seed != mine.seed) return differs("seed", p.seed, mine.seed);
  if (p.shuffle_files != mine.shuffle_files) {
    return differs("shuffle_files", p.shuffle_files, mine.shuffle_files);
  }
  if (p.shuffle_pieces != mine.shuffle_pieces) {
    return differs("shuffle_pieces", p.shuffle_pieces, mine.shuffle_pieces);
  }
  if (p.shuffle_buffer != mine.shuffle_buffer) {
    return differs("shuffle_buffer", p.shuffle_buffer, mine.shuffle_buffer);
  }
  if (p.num_shards != mine.num_shards) return differs("num_shards", p.num_shards, mine.num_shards);
  if (p.shard_index != mine.shard_index) {
    return differs("shard_index", p.shard_index, mine.shard_index);
  }
  if (p.equal_shards != mine.equal_shards) {
    return differs("equal_shards", p.equal_shards, mine.equal_shards);
  }
  if (p.batch_size != mine.batch_size) return differs("batch_size", p.batch_size, mine.batch_size);
  if (p.drop_last != mine.drop_last) return differs("drop_last", p.drop_last, mine.drop_last);
  if (p.bad_line_policy != mine.bad_line_policy) {
    return differs("bad_lines", p.bad_line_policy, mine.bad_line_policy);
  }
  return Status::OK();
}

Result<std::string> StreamReader::ResumePosition() const { return position().Serialize(); }

Status StreamReader::ResumeFrom(std::string_view text) {
  EMBER_ASSIGN_OR_RETURN(const StreamPosition position, StreamPosition::Parse(text));
  return Seek(position);
}

Status StreamReader::Seek(const StreamPosition& p) {
  EMBER_RETURN_IF_ERROR(CheckMatches(p));
  RecyclePiece();
  report_ = p.bad_lines;
  totals_.records_delivered = p.records_delivered;
  totals_.batches_delivered = p.batches_delivered;
  totals_.padded_for_equal_shards = p.padded_for_equal_shards;
  totals_.dropped_for_equal_shards = p.dropped_for_equal_shards;
  last_epoch_ = p.last_epoch;
  last_batch_in_epoch_ = p.last_batch_in_epoch;
  epoch_ = p.epoch;
  epoch_started_ = false;
  if (!p.epoch_started || epoch_ >= options_.num_epochs) return Status::OK();
  ResetEpoch();
  return Replay(p);
}

// Reads again what the position needs: the piece it stopped in, or with a
// shuffle buffer the records from the oldest one still in the buffer.
Status StreamReader::Replay(const StreamPosition& p) {
  auto mismatch = [&] {
    return Status::DataLoss("the position does not fit the input: epoch ", p.epoch, ", piece ",
                            p.piece, ", row ", p.piece_row);
  };
  // Fields that do not fit the shard's pieces and counts could make the
  // epoch endless: a piece past the shard's last, or padding past T_e.
  const bool first_pass_fits = p.piece < pieces_per_shard_ &&
                               p.counted_through < pieces_per_shard_ &&
                               p.replay_piece < pieces_per_shard_ && p.records_in <= shard_lines_;
  const bool padding_fits = target_ >= 0 && p.first_pass_records > 0 &&
                            p.first_pass_records < target_ &&
                            p.first_pass_records <= p.records_in && p.records_in <= target_;
  if (!(p.cycling ? padding_fits : first_pass_fits) || p.counted_through < p.piece ||
      p.replay_piece > p.piece || p.replay_input > p.records_in || p.records_out > p.records_in ||
      (target_ >= 0 && p.records_out > target_)) {
    return mismatch();
  }
  batches_in_epoch_ = p.batches_in_epoch;
  records_out_ = p.records_out;
  cycling_ = p.cycling;
  first_pass_records_ = p.first_pass_records;
  counted_through_ = p.counted_through;
  const bool replay = shuffle_ != nullptr && p.replay_piece >= 0;
  const int64_t start_piece = replay ? p.replay_piece : p.piece;
  const int64_t start_row = replay ? p.replay_row : p.piece_row;
  records_in_ = replay ? p.replay_input : p.records_in;
  EnsurePipelineAt(epoch_, std::max<int64_t>(start_piece, 0), cycling_);
  if (start_piece >= 0) {
    piece_index_ = start_piece - 1;
    EMBER_RETURN_IF_ERROR(PullPiece());
    if (start_row > piece_->parsed.rows.size) return mismatch();
    piece_row_ = start_row;
  }
  while (records_in_ < p.records_in) {
    EMBER_ASSIGN_OR_RETURN(const bool more, TakeInput());
    if (!more) return mismatch();
    const int64_t t = records_in_++;
    shuffle_->Put(shuffle_->SlotFor(t), piece_->parsed.rows, piece_row_,
                  {piece_index_, piece_row_, t});
    ++piece_row_;
  }
  if (records_in_ != p.records_in) return mismatch();
  if (!p.input_done && (piece_index_ != p.piece || piece_row_ != p.piece_row)) return mismatch();
  counted_through_ = p.counted_through;
  input_done_ = p.input_done;
  if (shuffle_ != nullptr && input_done_) {
    shuffle_->StartDrain(std::min(records_in_, shuffle_->capacity()));
    if (p.drain_step > std::min(records_in_, shuffle_->capacity())) return mismatch();
    shuffle_->set_drain_step(p.drain_step);
  }
  return Status::OK();
}

}  // namespace ember::io
