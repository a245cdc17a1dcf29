#include "io/internal/piece_pipeline.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "io/text_file.h"

namespace ember::io::internal {
namespace {

using ::ember::internal::StrCat;

// Decompressed bytes read at a time when skipping to a piece of a gzip file.
constexpr int64_t kGzipSkipBytes = int64_t{1} << 20;

// A file descriptor closed when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Status FileChanged(const std::string& path, int64_t end) {
  return Status::DataLoss(path, ": file changed since it was indexed: it ends before byte ", end);
}

// Reads bytes [begin, end) of a plain file into `out`.
Status ReadPlainPiece(const std::string& path, int64_t begin, int64_t end, char* out) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Status::IOError(path, ": cannot open: ", std::strerror(errno));
  int64_t done = 0;
  while (done < end - begin) {
    const ssize_t n = ::pread(fd.get(), out + done, end - begin - done, begin + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError(path, ": read failed: ", std::strerror(errno));
    if (n == 0) return FileChanged(path, end);
    done += n;
  }
  return Status::OK();
}

// What ParseLines makes of a line over kMaxLineBytes.
void TooLongLine(const IndexedPiece& piece, const TextLayout& layout, ParsedLines* out) {
  out->rows.Clear(layout.num_dense, layout.num_slots, layout.num_labels);
  out->lines = 1;
  out->bad_lines = 1;
  out->by_reason.fill(0);
  out->by_reason[static_cast<int>(BadLineReason::kLineTooLong)] = 1;
  out->examples.assign(1,
                       BadLine{1, BadLineReason::kLineTooLong, StrCat(piece.line_bytes, " bytes")});
}

void ClearParsed(const TextLayout& layout, ParsedLines* out) {
  out->rows.Clear(layout.num_dense, layout.num_slots, layout.num_labels);
  out->lines = 0;
  out->bad_lines = 0;
  out->by_reason.fill(0);
  out->examples.clear();
}

}  // namespace

struct PiecePipeline::GzipStream {
  int64_t next_ticket = 0;  // Guarded by the pipeline's mu_.
  int64_t serving = 0;      // Guarded by the pipeline's mu_.
  std::unique_ptr<TextFile> file;
  int64_t offset = 0;  // Decompressed bytes of `file` read.
};

void PiecePipeline::Buffer::Reserve(size_t bytes) {
  if (bytes <= size) return;
  size = std::max(bytes, size + size / 2);
  data = std::make_unique_for_overwrite<char[]>(size);
}

PiecePipeline::PiecePipeline(const InputIndex* index, const PipelineOptions& options)
    : index_(index),
      options_(options),
      pieces_per_shard_(PiecesPerShard(static_cast<int64_t>(index->pieces.size()),
                                       options.plan.num_shards, options.plan.shard_index)) {
  CHECK_GE(options.depth, 1) << "the pipeline needs room for one piece";
  CHECK_GE(options.threads, 1) << "the pipeline needs a thread";
  {
    MutexLock lock(mu_);
    slots_.resize(options.depth);
    gzip_.resize(index->files.size());
  }
  threads_.reserve(options.threads);
  for (int t = 0; t < options.threads; ++t) threads_.emplace_back([this] { Work(); });
}

PiecePipeline::~PiecePipeline() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  work_.NotifyAll();
  turn_.NotifyAll();
  for (std::thread& thread : threads_) thread.join();
}

void PiecePipeline::Restart(const PipelineCursor& start) {
  {
    MutexLock lock(mu_);
    ++generation_;
    for (auto& slot : slots_) {
      if (slot != nullptr) free_.push_back(std::move(slot));
    }
    // Streams with no ticket out: the new sequence reopens those it reads.
    for (auto& stream : gzip_) {
      if (stream != nullptr && stream->serving == stream->next_ticket) stream->file.reset();
    }
    next_seq_ = 0;
    consume_seq_ = 0;
    cursor_ = start;
    end_ = start.epoch >= options_.num_epochs || pieces_per_shard_ == 0;
  }
  work_.NotifyAll();
}

std::unique_ptr<ParsedPiece> PiecePipeline::Pop() {
  std::unique_ptr<ParsedPiece> piece;
  {
    MutexLock lock(mu_);
    const int64_t slot = consume_seq_ % options_.depth;
    ready_.Wait(mu_, [&]() REQUIRES(mu_) {
      return slots_[slot] != nullptr || (end_ && consume_seq_ == next_seq_);
    });
    if (slots_[slot] == nullptr) return nullptr;
    piece = std::move(slots_[slot]);
    ++consume_seq_;
  }
  work_.NotifyAll();
  return piece;
}

void PiecePipeline::Recycle(std::unique_ptr<ParsedPiece> piece) {
  MutexLock lock(mu_);
  free_.push_back(std::move(piece));
}

bool PiecePipeline::CanClaim() const { return !end_ && next_seq_ < consume_seq_ + options_.depth; }

PiecePipeline::Job PiecePipeline::Claim() {
  Job job;
  job.generation = generation_;
  job.seq = next_seq_++;
  job.at = cursor_;
  if (plan_ == nullptr || plan_->epoch != cursor_.epoch) {
    plan_ = std::make_shared<const EpochPlan>(PlanEpoch(*index_, options_.plan, cursor_.epoch));
  }
  const int64_t at = cursor_.index % pieces_per_shard_;
  job.piece = plan_->pieces[at];
  const IndexedPiece& piece = index_->pieces[job.piece];
  if (!index_->columnar && index_->files[piece.file].gzip && !piece.too_long) {
    std::unique_ptr<GzipStream>& stream = gzip_[piece.file];
    if (stream == nullptr) stream = std::make_unique<GzipStream>();
    job.gzip = stream.get();
    job.ticket = stream->next_ticket++;
    job.last_of_file = !ReadsMoreOfFile(at, piece.file);
  }
  ++cursor_.index;
  if (!cursor_.cycle && cursor_.index == pieces_per_shard_) {
    ++cursor_.epoch;
    cursor_.index = 0;
  }
  end_ = cursor_.epoch >= options_.num_epochs;
  return job;
}

// Whether a piece after plan_->pieces[at] in the epoch (a round, when
// cycling) is read from `file`'s stream. A shard's pieces of a gzip file are
// consecutive in its plan.
bool PiecePipeline::ReadsMoreOfFile(int64_t at, int32_t file) const {
  for (int64_t i = at + 1; i < pieces_per_shard_; ++i) {
    const IndexedPiece& next = index_->pieces[plan_->pieces[i]];
    if (next.file != file) return false;
    if (!next.too_long) return true;
  }
  return false;
}

void PiecePipeline::Work() {
  Buffer buffer;
  while (true) {
    Job job;
    std::unique_ptr<ParsedPiece> piece;
    {
      MutexLock lock(mu_);
      work_.Wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || CanClaim(); });
      if (stopping_) return;
      job = Claim();
      if (!free_.empty()) {
        piece = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (piece == nullptr) piece = std::make_unique<ParsedPiece>();
    Produce(job, piece.get(), &buffer);
    bool ready = false;
    {
      MutexLock lock(mu_);
      if (job.generation == generation_ && !stopping_) {
        slots_[job.seq % options_.depth] = std::move(piece);
        ready = true;
      } else {
        free_.push_back(std::move(piece));
      }
    }
    if (ready) ready_.NotifyAll();
  }
}

void PiecePipeline::Produce(const Job& job, ParsedPiece* out, Buffer* buffer) {
  out->epoch = job.at.epoch;
  out->index = job.at.index;
  out->piece = job.piece;
  out->status = Status::OK();
  const IndexedPiece& piece = index_->pieces[job.piece];
  const IndexedFile& file = index_->files[piece.file];
  const TextLayout& layout = index_->layout;
  if (index_->columnar) {
    ClearParsed(layout, &out->parsed);
    out->status = file.columnar->ReadRows(piece.begin, piece.end, &out->parsed.rows);
    out->parsed.lines = piece.lines;
    return;
  }
  if (piece.too_long) {
    TooLongLine(piece, layout, &out->parsed);
    return;
  }
  const int64_t bytes = piece.end - piece.begin;
  // A gzip read skips other pieces through the buffer: room for large reads.
  buffer->Reserve(job.gzip != nullptr ? std::max<int64_t>(bytes, kGzipSkipBytes) : bytes);
  out->status = job.gzip != nullptr
                    ? ReadGzipInTurn(job, piece, buffer)
                    : ReadPlainPiece(file.path, piece.begin, piece.end, buffer->data.get());
  if (!out->status.ok()) {
    ClearParsed(layout, &out->parsed);
    return;
  }
  ParseLines(std::string_view(buffer->data.get(), bytes), *file.parser, layout,
             options_.stop_at_bad_line, &out->parsed);
}

Status PiecePipeline::ReadGzipInTurn(const Job& job, const IndexedPiece& piece, Buffer* buffer) {
  GzipStream* stream = job.gzip;
  bool current = false;
  {
    MutexLock lock(mu_);
    turn_.Wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || stream->serving == job.ticket; });
    if (stopping_) return Status::Cancelled("the reader is closing");
    current = job.generation == generation_;
  }
  // A piece of an abandoned sequence only passes its turn on.
  Status status =
      current ? ReadGzipPiece(job, piece, buffer) : Status::Cancelled("the reader moved elsewhere");
  {
    MutexLock lock(mu_);
    // The last ticket of an abandoned sequence closes the stream it left open.
    if (job.generation != generation_ && stream->next_ticket == job.ticket + 1) {
      stream->file.reset();
    }
    ++stream->serving;
  }
  turn_.NotifyAll();
  return status;
}

Status PiecePipeline::ReadGzipPiece(const Job& job, const IndexedPiece& piece, Buffer* buffer) {
  GzipStream* stream = job.gzip;
  const IndexedFile& file = index_->files[piece.file];
  if (stream->file == nullptr || stream->offset > piece.begin) {
    stream->file.reset();
    EMBER_ASSIGN_OR_RETURN(stream->file, OpenTextFile(file.path));
    stream->offset = 0;
  }
  // Bytes of other pieces (other shards', lines too long to read) pass
  // through the buffer, which holds at least one piece.
  char* data = buffer->data.get();
  const int64_t bytes = piece.end - piece.begin;
  while (stream->offset < piece.begin) {
    {
      // A long skip gives up early when the reader closes or moves on.
      MutexLock lock(mu_);
      if (stopping_ || job.generation != generation_) {
        return Status::Cancelled("the reader moved elsewhere");
      }
    }
    const size_t want = static_cast<size_t>(
        std::min<int64_t>(piece.begin - stream->offset, static_cast<int64_t>(buffer->size)));
    Result<size_t> n = stream->file->Read(data, want);
    if (!n.ok() || *n == 0) {
      stream->file.reset();
      return n.ok() ? FileChanged(file.path, piece.end) : n.status();
    }
    stream->offset += static_cast<int64_t>(*n);
  }
  int64_t done = 0;
  while (done < bytes) {
    Result<size_t> n = stream->file->Read(data + done, static_cast<size_t>(bytes - done));
    if (!n.ok() || *n == 0) {
      stream->file.reset();
      return n.ok() ? FileChanged(file.path, piece.end) : n.status();
    }
    done += static_cast<int64_t>(*n);
  }
  stream->offset = piece.end;
  // The sequence's last piece of the file (in this epoch or round): nothing
  // more to read from this stream until the file comes round again.
  if (job.last_of_file) stream->file.reset();
  return Status::OK();
}

}  // namespace ember::io::internal
