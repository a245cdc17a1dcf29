#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "io/internal/epoch_plan.h"
#include "io/internal/stream_index.h"
#include "io/text_reader.h"

namespace ember::io::internal {

// One piece of a shard's epoch, read and parsed.
struct ParsedPiece {
  int64_t epoch = 0;
  int64_t index = 0;  // In the shard's sequence of the epoch (see PipelineCursor).
  int64_t piece = 0;  // In InputIndex::pieces.
  // A read failure (IOError; DataLoss for a truncated gzip file or a file
  // that changed since it was indexed); `parsed` is then empty.
  Status status;
  // The piece's examples and bad lines, line numbers counted from the
  // piece's first line (ParseLines). A columnar piece has `lines` rows and
  // no bad lines.
  ParsedLines parsed;
};

// Where a pipeline's sequence of pieces starts. The sequence of a shard in
// an epoch is its plan's pieces (EpochPlan) in order, index 0 to P - 1; the
// next index is index 0 of the next epoch, or, when `cycle`, index P, which
// is the plan's piece 0 again (index i is piece i mod P), and so on until the
// pipeline is restarted.
struct PipelineCursor {
  int64_t epoch = 0;
  int64_t index = 0;
  bool cycle = false;
  bool operator==(const PipelineCursor&) const = default;
};

struct PipelineOptions {
  PlanOptions plan;
  int64_t num_epochs = 1;
  bool stop_at_bad_line = false;  // ParseLines' flag (BadLinePolicy::kFail).
  int threads = 1;
  int depth = 2;  // Pieces claimed by threads and not yet popped, at most.
};

// Reads and parses the pieces of a shard on `threads` threads of its own, in
// any order, and hands them out in sequence order through a bounded window
// of `depth` pieces: memory holds at most depth + threads pieces and their
// examples. The pieces of a gzip file are decompressed one after the other
// in sequence order (a thread waits for its turn), from one open stream that
// skips the pieces of other shards; the others are read with pread. A gzip
// stream is closed once the sequence reads no more of its file in the epoch
// (or round), and when a restart abandons it: the streams open are those the
// current sequence reads, not every gzip file touched.
//
// Threads of its own rather than oneTBB tasks: a gzip piece waits for the one
// before it, and a task that blocks can hold the thread that the task it
// waits for needs.
// Thread safety: Restart, Pop and Recycle are called by one thread (the
// reader's).
class PiecePipeline {
 public:
  // `index` is borrowed for the pipeline's lifetime. It starts idle.
  PiecePipeline(const InputIndex* index, const PipelineOptions& options);
  // Stops the threads (a piece being read is finished first) and joins them.
  ~PiecePipeline();
  PiecePipeline(const PiecePipeline&) = delete;
  PiecePipeline& operator=(const PiecePipeline&) = delete;

  // Drops every piece read or being read and goes on from `start`.
  void Restart(const PipelineCursor& start);
  // The next piece of the sequence, waiting for it; null once the sequence
  // passed the last epoch.
  std::unique_ptr<ParsedPiece> Pop();
  // Gives a popped piece back for reuse of its memory.
  void Recycle(std::unique_ptr<ParsedPiece> piece);

 private:
  // The read state of one gzip file: turns (tickets handed out in sequence
  // order) and the open stream, used only by the holder of the ticket being
  // served.
  struct GzipStream;
  struct Job {
    int64_t generation = 0;
    int64_t seq = 0;
    PipelineCursor at;
    int64_t piece = 0;
    GzipStream* gzip = nullptr;
    int64_t ticket = 0;
    bool last_of_file = false;  // The sequence reads no more of the gzip file after it.
  };
  // A worker's read buffer, grown as needed.
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t size = 0;
    void Reserve(size_t bytes);
  };

  void Work();
  bool CanClaim() const REQUIRES(mu_);
  Job Claim() REQUIRES(mu_);
  bool ReadsMoreOfFile(int64_t at, int32_t file) const REQUIRES(mu_);
  void Produce(const Job& job, ParsedPiece* out, Buffer* buffer);
  Status ReadGzipPiece(const Job& job, const IndexedPiece& piece, Buffer* buffer);
  Status ReadGzipInTurn(const Job& job, const IndexedPiece& piece, Buffer* buffer);

  const InputIndex* index_;
  const PipelineOptions options_;
  const int64_t pieces_per_shard_;

  Mutex mu_;
  CondVar work_;   // A piece can be claimed, or stop.
  CondVar ready_;  // The next piece is ready.
  CondVar turn_;   // A gzip stream serves its next ticket.
  bool stopping_ GUARDED_BY(mu_) = false;
  int64_t generation_ GUARDED_BY(mu_) = 0;
  bool end_ GUARDED_BY(mu_) = true;                        // No more pieces to claim.
  PipelineCursor cursor_ GUARDED_BY(mu_);                  // The next piece to claim.
  std::shared_ptr<const EpochPlan> plan_ GUARDED_BY(mu_);  // Of cursor_.epoch.
  int64_t next_seq_ GUARDED_BY(mu_) = 0;                   // Pieces claimed since the restart.
  int64_t consume_seq_ GUARDED_BY(mu_) = 0;                // Pieces popped since the restart.
  std::vector<std::unique_ptr<ParsedPiece>> slots_ GUARDED_BY(mu_);  // [depth], by seq.
  std::vector<std::unique_ptr<ParsedPiece>> free_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<GzipStream>> gzip_ GUARDED_BY(mu_);  // By file, made on use.
  std::vector<std::thread> threads_;
};

}  // namespace ember::io::internal
