#include "io/text_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include <glog/logging.h>

#include "core/threads.h"
#include "io/internal/text_parsing.h"
#include "io/text_file.h"

namespace ember::io {
namespace {

using ::ember::internal::StrCat;

// Bytes read from a file before they are parsed; bounds the reader's memory.
constexpr size_t kBlockBytes = size_t{64} << 20;
// A block is cut at newlines into pieces of about this size, parsed in
// parallel. Fixed (not derived from the thread count) so that the pieces, and
// hence everything computed per piece, are the same for every thread count.
constexpr size_t kPieceBytes = size_t{1} << 20;

bool IsLineEnd(char c) { return c == '\n' || c == '\r'; }

int64_t CountLines(std::string_view text) {
  if (text.empty()) return 0;
  int64_t lines = 0;
  const char* pos = text.data();
  const char* end = text.data() + text.size();
  while (const void* newline = std::memchr(pos, '\n', end - pos)) {
    ++lines;
    pos = static_cast<const char*>(newline) + 1;
  }
  return text.back() == '\n' ? lines : lines + 1;
}

// Cuts `text` (complete lines) into pieces of about kPieceBytes at newlines.
std::vector<std::string_view> CutIntoPieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = std::min(begin + kPieceBytes, text.size());
    if (end < text.size()) {
      const void* newline = std::memchr(text.data() + end, '\n', text.size() - end);
      end = newline ? static_cast<const char*>(newline) - text.data() + 1 : text.size();
    }
    pieces.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return pieces;
}

// A read buffer whose bytes are not initialised (a block is large).
struct ReadBuffer {
  explicit ReadBuffer(size_t bytes)
      : data(std::make_unique_for_overwrite<char[]>(bytes)), size(bytes) {}
  std::unique_ptr<char[]> data;
  size_t size;
};

// Reads files one after the other into `all` and `report`, keeping file and
// line order and line numbers. Thread safety: none (it runs the parallel
// parse itself).
class FileReader {
 public:
  FileReader(const TextFormat& format, const TextReadOptions& options, ThreadArena* arena,
             Batch* all, BadLineReport* report)
      : format_(format),
        layout_(format.layout()),
        options_(options),
        arena_(arena),
        all_(all),
        report_(report),
        buffer_(kBlockBytes) {}

  Status Read(const std::string& path);

 private:
  Result<size_t> StartFile(std::string_view text, bool eof);
  Status ParseText(std::string_view text, bool first_block);
  Status MergePieces(int64_t count);
  void PlacePieces(int64_t count);
  Status AddExample(int64_t line, BadLineReason reason, const std::string& got);
  Status SkipLongLine(TextFile* file, size_t* filled);
  Result<size_t> Fill(TextFile* file, size_t filled, bool* eof);
  void ReserveForFile(size_t parsed_bytes, int64_t count);

  const TextFormat& format_;
  const TextLayout layout_;
  const TextReadOptions& options_;
  ThreadArena* arena_;
  Batch* all_;
  BadLineReport* report_;
  ReadBuffer buffer_;
  // The parse of each piece of the current block; kept from block to block
  // so that their capacity is reused.
  std::vector<ParsedLines> pieces_;
  std::unique_ptr<LineParser> parser_;  // Of the current file.
  std::string path_;
  int64_t lines_before_ = 0;  // Lines of the file already parsed.
  int64_t examples_before_ = 0;  // Good lines of every file so far, kept or not.
};

Status FileReader::Read(const std::string& path) {
  path_ = path;
  lines_before_ = 0;
  parser_.reset();
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<TextFile> file, OpenTextFile(path));
  char* data = buffer_.data.get();
  bool first_block = true;
  size_t filled = 0;
  bool eof = false;
  while (!eof) {
    EMBER_ASSIGN_OR_RETURN(filled, Fill(file.get(), filled, &eof));
    if (parser_ == nullptr) {
      EMBER_ASSIGN_OR_RETURN(const size_t header_bytes,
                             StartFile(std::string_view(data, filled), eof));
      if (parser_ == nullptr) return Status::OK();  // An empty file of a header format.
      std::memmove(data, data + header_bytes, filled - header_bytes);
      filled -= header_bytes;
      // Top the block up again before cutting it into lines.
      if (!eof && header_bytes > 0) continue;
    }
    std::string_view text(data, filled);
    if (eof) {
      // Blank lines at the end of a file are not examples.
      while (!text.empty() && IsLineEnd(text.back())) text.remove_suffix(1);
      return ParseText(text, /*first_block=*/false);
    }
    const size_t last_newline = text.rfind('\n');
    if (last_newline == std::string_view::npos) {
      EMBER_RETURN_IF_ERROR(SkipLongLine(file.get(), &filled));
      continue;
    }
    // Blank lines at the end of the block stay unparsed until we know
    // whether they end the file.
    size_t cut = last_newline + 1;
    const size_t last_content = text.find_last_not_of("\r\n");
    if (last_content != std::string_view::npos && last_content < last_newline) {
      cut = text.find('\n', last_content) + 1;
    }
    EMBER_RETURN_IF_ERROR(ParseText(text.substr(0, cut), first_block));
    first_block = false;
    std::memmove(data, data + cut, filled - cut);
    filled -= cut;
  }
  return Status::OK();
}

// Makes the parser of the file whose first bytes are `text` (all of the file
// if `eof`). Returns the bytes of the header line, which are not examples;
// leaves parser_ empty if the file has no lines at all and the format wants
// a header.
Result<size_t> FileReader::StartFile(std::string_view text, bool eof) {
  std::string_view header;
  size_t header_bytes = 0;
  if (!format_.has_header() && text.starts_with(internal::kUtf8ByteOrderMark)) {
    header_bytes = internal::kUtf8ByteOrderMark.size();  // Not part of line 1.
  }
  if (format_.has_header()) {
    // Fill stops short of a full buffer only at the end of the file.
    if (text.empty()) return size_t{0};
    const size_t newline = text.find('\n');
    if (newline == std::string_view::npos && !eof) {
      return Status::InvalidArgument(path_, ":1: header line longer than ", kBlockBytes >> 20,
                                     " MiB");
    }
    header_bytes = newline == std::string_view::npos ? text.size() : newline + 1;
    header = text.substr(0, std::min(newline, text.size()));
    if (!header.empty() && header.back() == '\r') header.remove_suffix(1);
    if (header.starts_with(internal::kUtf8ByteOrderMark)) {
      header.remove_prefix(internal::kUtf8ByteOrderMark.size());
    }
    lines_before_ = 1;
  }
  Result<std::unique_ptr<LineParser>> parser = format_.NewLineParser(header);
  if (!parser.ok()) {
    return parser.status().WithContext(format_.has_header() ? path_ + ":1" : path_);
  }
  parser_ = std::move(*parser);
  return header_bytes;
}

// Fills buffer[filled..] from the file; sets *eof when the file is exhausted.
Result<size_t> FileReader::Fill(TextFile* file, size_t filled, bool* eof) {
  while (filled < buffer_.size) {
    EMBER_ASSIGN_OR_RETURN(const size_t n,
                           file->Read(buffer_.data.get() + filled, buffer_.size - filled));
    if (n == 0) {
      *eof = true;
      break;
    }
    filled += n;
  }
  return filled;
}

// The buffer holds the start of a line longer than a whole block: reports it
// as too long and drops bytes up to and including its newline.
Status FileReader::SkipLongLine(TextFile* file, size_t* filled) {
  ++lines_before_;
  ++report_->lines_read;
  EMBER_RETURN_IF_ERROR(
      AddExample(lines_before_, BadLineReason::kLineTooLong, "more than a block"));
  ++report_->bad_lines;
  ++report_->by_reason[BadLineReasonName(BadLineReason::kLineTooLong)];
  char* data = buffer_.data.get();
  while (true) {
    EMBER_ASSIGN_OR_RETURN(const size_t n, file->Read(data, buffer_.size));
    if (n == 0) {
      *filled = 0;
      return Status::OK();
    }
    const void* newline = std::memchr(data, '\n', n);
    if (newline != nullptr) {
      const size_t rest_begin = static_cast<const char*>(newline) - data + 1;
      std::memmove(data, data + rest_begin, n - rest_begin);
      *filled = n - rest_begin;
      return Status::OK();
    }
  }
}

// Reserves room for the whole of a plain file, estimated from the bytes and
// keys per row of the first `count` pieces (its first block, `parsed_bytes`
// long, not yet placed), so that the rows are not copied as they grow.
void FileReader::ReserveForFile(size_t parsed_bytes, int64_t count) {
  std::error_code error;
  const uintmax_t file_bytes = std::filesystem::file_size(path_, error);
  int64_t parsed_rows = 0;
  int64_t parsed_keys = 0;
  for (int64_t i = 0; i < count; ++i) {
    parsed_rows += pieces_[i].rows.size;
    parsed_keys += static_cast<int64_t>(pieces_[i].rows.keys.size());
  }
  if (error || path_.ends_with(".gz") || parsed_rows == 0 || file_bytes < parsed_bytes) return;
  const double rows_per_byte = static_cast<double>(parsed_rows) / parsed_bytes;
  const double keys_per_row = static_cast<double>(parsed_keys) / parsed_rows;
  const int64_t file_rows =
      static_cast<int64_t>(1.02 * file_bytes * rows_per_byte / options_.keep_every) + 1;
  const int64_t rows = all_->size + file_rows;
  all_->labels.reserve(rows * layout_.num_labels);
  all_->dense.reserve(rows * layout_.num_dense);
  all_->keys.reserve(all_->keys.size() + static_cast<size_t>(file_rows * keys_per_row) + 1);
  all_->offsets.reserve(rows * layout_.num_slots + 1);
}

// With kFail, returns the error for a bad line; otherwise keeps it as an
// example while there is room. `line` is a line number within the file.
// Counting is the caller's.
Status FileReader::AddExample(int64_t line, BadLineReason reason, const std::string& got) {
  const std::string where = StrCat(path_, ":", line, ": ", BadLineReasonName(reason));
  if (options_.bad_lines == BadLinePolicy::kFail) {
    return Status::InvalidArgument(where, " (got ", got, ")");
  }
  if (report_->first_examples.size() < kMaxBadLineExamples) {
    report_->first_examples.push_back(StrCat(where, " (got ", got, ")"));
  }
  return Status::OK();
}

// Parses `text` (complete lines): its pieces in parallel, each into a batch
// of its own, then the pieces' examples are placed after those of `all_`.
// The first block of a file (not its last) sizes `all_` for the file.
Status FileReader::ParseText(std::string_view text, bool first_block) {
  const std::vector<std::string_view> pieces = CutIntoPieces(text);
  const int64_t count = static_cast<int64_t>(pieces.size());
  if (pieces_.size() < pieces.size()) pieces_.resize(pieces.size());
  const bool stop_at_bad_line = options_.bad_lines == BadLinePolicy::kFail;
  arena_->Execute([&] {
    ParallelFor(0, count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        ParseLines(pieces[i], *parser_, layout_, stop_at_bad_line, &pieces_[i]);
      }
    });
  });
  if (first_block) ReserveForFile(text.size(), count);
  return MergePieces(count);
}

// Takes the bad lines of the parsed pieces in order, then their examples.
Status FileReader::MergePieces(int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const ParsedLines& piece = pieces_[i];
    for (const BadLine& bad : piece.examples) {
      EMBER_RETURN_IF_ERROR(AddExample(lines_before_ + bad.line, bad.reason, bad.got));
    }
    report_->lines_read += piece.lines;
    report_->bad_lines += piece.bad_lines;
    for (int reason = 0; reason < kNumBadLineReasons; ++reason) {
      if (piece.by_reason[reason] > 0) {
        report_->by_reason[BadLineReasonName(static_cast<BadLineReason>(reason))] +=
            piece.by_reason[reason];
      }
    }
    lines_before_ += piece.lines;
  }
  PlacePieces(count);
  return Status::OK();
}

// Appends the examples of the first `count` pieces to `all_`, in order.
// One sequential copy: copying is memory bound, and resizing `all_` to copy
// the pieces in parallel would first fill it with zeros.
void FileReader::PlacePieces(int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const Batch& rows = pieces_[i].rows;
    if (rows.size == 0) continue;
    if (options_.keep_every > 1) {
      AppendEveryNth(rows, examples_before_, options_.keep_every, options_.keep_offset, all_);
      examples_before_ += rows.size;
      continue;
    }
    examples_before_ += rows.size;
    all_->labels.insert(all_->labels.end(), rows.labels.begin(), rows.labels.end());
    all_->dense.insert(all_->dense.end(), rows.dense.begin(), rows.dense.end());
    // The piece's offsets start at 0; ours continue from our last key.
    const int64_t shift = static_cast<int64_t>(all_->keys.size());
    all_->keys.insert(all_->keys.end(), rows.keys.begin(), rows.keys.end());
    const size_t first_new = all_->offsets.size();
    all_->offsets.insert(all_->offsets.end(), rows.offsets.begin() + 1, rows.offsets.end());
    for (size_t b = first_new; b < all_->offsets.size(); ++b) all_->offsets[b] += shift;
    all_->size += rows.size;
  }
}

Status CheckBadLines(const BadLineReport& report, const TextReadOptions& options) {
  if (report.bad_lines == 0) return Status::OK();
  std::string reasons;
  for (const auto& [reason, count] : report.by_reason) {
    reasons += StrCat(reasons.empty() ? "" : ", ", reason, ": ", count);
  }
  LOG(WARNING) << "Skipped " << report.bad_lines << " bad lines of " << report.lines_read << " ("
               << reasons << "); first: " << report.first_examples.front();
  const double ratio =
      static_cast<double>(report.bad_lines) / static_cast<double>(report.lines_read);
  if (ratio > options.max_bad_ratio) {
    return Status::InvalidArgument("too many bad lines: ", report.bad_lines, " of ",
                                   report.lines_read, " (ratio ", ratio, " > max_bad_ratio ",
                                   options.max_bad_ratio, "; ", reasons,
                                   "); first: ", report.first_examples.front());
  }
  return Status::OK();
}

}  // namespace

const char* BadLineReasonName(BadLineReason reason) {
  switch (reason) {
    case BadLineReason::kColumnCount:
      return "column count";
    case BadLineReason::kBadLabel:
      return "bad label";
    case BadLineReason::kUnparsableInteger:
      return "unparsable integer";
    case BadLineReason::kUnparsableNumber:
      return "unparsable number";
    case BadLineReason::kBadFeature:
      return "bad feature";
    case BadLineReason::kUnknownSlot:
      return "unknown slot";
    case BadLineReason::kLineTooLong:
      return "line too long";
    case BadLineReason::kBinaryData:
      return "binary data";
  }
  return "unknown";
}

Result<BadLinePolicy> ParseBadLinePolicy(const std::string& name) {
  if (name == "skip") return BadLinePolicy::kSkip;
  if (name == "fail") return BadLinePolicy::kFail;
  return Status::InvalidArgument("bad line policy must be \"skip\" or \"fail\", got \"", name,
                                 "\"");
}

void ParseLines(std::string_view text, const LineParser& parser, const TextLayout& layout,
                bool stop_at_bad_line, ParsedLines* out) {
  Batch& rows = out->rows;
  rows.Clear(layout.num_dense, layout.num_slots, layout.num_labels);
  out->lines = 0;
  out->bad_lines = 0;
  out->by_reason.fill(0);
  out->examples.clear();
  // Room for one example per line (most lines are good), so that the rows do
  // not grow by copying; kept when `out` is reused.
  const int64_t lines = CountLines(text);
  rows.labels.reserve(lines * layout.num_labels);
  rows.dense.reserve(lines * layout.num_dense);
  rows.offsets.reserve(lines * layout.num_slots + 1);
  rows.keys.reserve(lines * layout.num_slots);
  size_t pos = 0;
  while (pos < text.size()) {
    const void* newline = std::memchr(text.data() + pos, '\n', text.size() - pos);
    const size_t end = newline ? static_cast<const char*>(newline) - text.data() : text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++out->lines;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineError error;
    const void* nul = nullptr;
    if (line.size() > kMaxLineBytes) {
      error = LineError{BadLineReason::kLineTooLong, StrCat(line.size(), " bytes")};
    } else if ((nul = std::memchr(line.data(), '\0', line.size())) != nullptr) {
      // Hashed as a categorical value it would pass as a feature.
      error = LineError{BadLineReason::kBinaryData,
                        StrCat("a NUL byte at byte ", static_cast<const char*>(nul) - line.data() + 1)};
    } else {
      const size_t labels = rows.labels.size();
      const size_t dense = rows.dense.size();
      const size_t offsets = rows.offsets.size();
      const size_t keys = rows.keys.size();
      if (parser.ParseLine(line, &rows, &error)) {
        DCHECK_EQ(rows.labels.size(), labels + layout.num_labels) << "one example's labels";
        DCHECK_EQ(rows.dense.size(), dense + layout.num_dense) << "one example's dense values";
        DCHECK_EQ(rows.offsets.size(), offsets + layout.num_slots) << "one offset per slot";
        DCHECK_EQ(rows.offsets.back(), static_cast<int64_t>(rows.keys.size()))
            << "the last bag ends at the last key";
        ++rows.size;
        continue;
      }
      // The parser may have appended part of the example.
      rows.labels.resize(labels);
      rows.dense.resize(dense);
      rows.offsets.resize(offsets);
      rows.keys.resize(keys);
    }
    ++out->bad_lines;
    ++out->by_reason[static_cast<int>(error.reason)];
    if (out->examples.size() < kMaxBadLineExamples) {
      out->examples.push_back(BadLine{out->lines, error.reason, std::move(error.got)});
    }
    if (stop_at_bad_line) return;
  }
}

Result<Dataset> ReadTextFiles(const std::vector<std::string>& paths, const TextFormat& format,
                              const TextReadOptions& options) {
  if (paths.empty()) return Status::InvalidArgument("no ", format.name(), " files to read");
  if (options.keep_every < 1 || options.keep_offset < 0 ||
      options.keep_offset >= options.keep_every) {
    return Status::InvalidArgument("keep_offset ", options.keep_offset, " of keep_every ",
                                   options.keep_every, " (need 0 <= offset < every)");
  }
  const TextLayout layout = format.layout();
  Batch all;
  all.Clear(layout.num_dense, layout.num_slots, layout.num_labels);
  BadLineReport report;
  ThreadArena arena(options.threads);
  FileReader reader(format, options, &arena, &all, &report);
  for (const std::string& path : paths) EMBER_RETURN_IF_ERROR(reader.Read(path));
  EMBER_RETURN_IF_ERROR(CheckBadLines(report, options));
  return Dataset(std::move(all), std::move(report));
}

}  // namespace ember::io
