#include "io/criteo.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string_view>

#include <glog/logging.h>

#include "core/threads.h"
#include "io/text_file.h"

namespace ember::io {
namespace {

// A longer line is a bad line of its own, whatever it holds.
constexpr size_t kMaxLineBytes = size_t{1} << 20;
// Bytes read from a file before they are parsed; bounds the reader's memory.
constexpr size_t kBlockBytes = size_t{64} << 20;
// A block is cut at newlines into pieces of about this size, parsed in
// parallel. Fixed (not derived from the thread count) so that the pieces, and
// hence everything computed per piece, are the same for every thread count.
constexpr size_t kPieceBytes = size_t{1} << 20;
constexpr size_t kMaxBadLineExamples = 5;
// Longest excerpt of a bad field quoted in a message.
constexpr size_t kMaxQuotedBytes = 32;

enum Reason { kColumnCount, kBadLabel, kUnparsableInteger, kLineTooLong, kNumReasons };

const char* ReasonName(int reason) {
  switch (reason) {
    case kColumnCount:
      return "column count";
    case kBadLabel:
      return "bad label";
    case kUnparsableInteger:
      return "unparsable integer";
    case kLineTooLong:
      return "line too long";
  }
  return "unknown";
}

// Most Criteo counts are small; their LogTransform is looked up, not computed.
constexpr int64_t kSmallCounts = 4096;

const std::array<float, kSmallCounts>& SmallCountLogs() {
  static const std::array<float, kSmallCounts> logs = [] {
    std::array<float, kSmallCounts> table;
    for (int64_t x = 0; x < kSmallCounts; ++x) table[x] = LogTransform(static_cast<double>(x));
    return table;
  }();
  return logs;
}

std::string Quote(std::string_view field) {
  if (field.size() <= kMaxQuotedBytes) return internal::StrCat("\"", field, "\"");
  return internal::StrCat("\"", field.substr(0, kMaxQuotedBytes), "...\"");
}

struct BadLine {
  int64_t line = 0;  // 1-based, within the piece until the piece is placed.
  int reason = 0;
  std::string got;
};

// Where a piece writes its examples: row k of the piece goes to labels[k],
// dense[k * kCriteoDense ..], keys[k * kCriteoSlots ..]. Criteo bags hold
// exactly one key each, so offsets need not be written per row.
struct RowSink {
  float* labels = nullptr;
  float* dense = nullptr;
  Key* keys = nullptr;
};

// One piece of a block: complete lines, each ending in '\n' except possibly
// the last line of a file.
struct Piece {
  std::string_view text;
  int64_t first_row = 0;  // Offset of the piece's rows in the block's rows.
  int64_t lines = 0;      // Lines in `text` (an upper bound on its rows).
  int64_t rows = 0;       // Rows written (lines less bad lines).
  int64_t bad_lines = 0;
  std::array<int64_t, kNumReasons> by_reason{};
  std::vector<BadLine> examples;  // The first kMaxBadLineExamples.
};

// Parses one line (without its line ending) into row 0 of `sink`. Returns
// false with the reason and what was found if the line is bad; the row is
// then unspecified.
bool ParseLine(std::string_view line, int slot_bits, const RowSink& sink, BadLine* bad) {
  std::array<std::string_view, kCriteoColumns> fields;
  int columns = 0;
  // Fields are short (8 bytes or less): a byte loop beats a memchr per field.
  size_t start = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\t') continue;
    if (columns < kCriteoColumns) fields[columns] = line.substr(start, i - start);
    ++columns;
    start = i + 1;
  }
  if (columns < kCriteoColumns) fields[columns] = line.substr(start);
  ++columns;
  if (columns != kCriteoColumns) {
    *bad = BadLine{0, kColumnCount, internal::StrCat(columns, " columns")};
    return false;
  }
  if (fields[0] != "0" && fields[0] != "1") {
    *bad = BadLine{0, kBadLabel, Quote(fields[0])};
    return false;
  }
  for (int j = 0; j < kCriteoDense; ++j) {
    const std::string_view field = fields[1 + j];
    int64_t value = 0;
    if (!field.empty()) {
      const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
      if (error != std::errc() || end != field.data() + field.size()) {
        *bad = BadLine{0, kUnparsableInteger, internal::StrCat("I", j + 1, "=", Quote(field))};
        return false;
      }
    }
    sink.dense[j] = value >= 0 && value < kSmallCounts ? SmallCountLogs()[value]
                                                       : LogTransform(static_cast<double>(value));
  }
  sink.labels[0] = fields[0] == "1" ? 1.0f : 0.0f;
  for (int s = 0; s < kCriteoSlots; ++s) {
    sink.keys[s] = HashCategorical(s, fields[1 + kCriteoDense + s], slot_bits);
  }
  return true;
}

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

// Parses piece->text into `sink`, from row 0 on. With kFail it stops at the
// first bad line.
void ParsePiece(const CriteoReadOptions& options, RowSink sink, Piece* piece) {
  const std::string_view text = piece->text;
  int64_t line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const void* newline = std::memchr(text.data() + pos, '\n', text.size() - pos);
    const size_t end = newline ? static_cast<const char*>(newline) - text.data() : text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    BadLine bad;
    if (line.size() > kMaxLineBytes) {
      bad = BadLine{0, kLineTooLong, internal::StrCat(line.size(), " bytes")};
    } else if (ParseLine(line, options.slot_bits, sink, &bad)) {
      ++piece->rows;
      sink.labels += 1;
      sink.dense += kCriteoDense;
      sink.keys += kCriteoSlots;
      continue;
    }
    bad.line = line_number;
    ++piece->bad_lines;
    ++piece->by_reason[bad.reason];
    if (piece->examples.size() < kMaxBadLineExamples) piece->examples.push_back(std::move(bad));
    if (options.bad_lines == BadLinePolicy::kFail) return;
  }
}

// Cuts `text` (complete lines) into pieces of about kPieceBytes at newlines.
std::vector<Piece> CutIntoPieces(std::string_view text) {
  std::vector<Piece> pieces;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = std::min(begin + kPieceBytes, text.size());
    if (end < text.size()) {
      const void* newline = std::memchr(text.data() + end, '\n', text.size() - end);
      end = newline ? static_cast<const char*>(newline) - text.data() + 1 : text.size();
    }
    pieces.emplace_back().text = text.substr(begin, end - begin);
    begin = end;
  }
  return pieces;
}

// Grows the rows of `all` to `rows` (offsets excluded). Vectors grow by at
// least half so that many blocks cost amortised linear copying.
void ResizeRows(int64_t rows, Batch* all) {
  if (static_cast<size_t>(rows) > all->labels.capacity()) {
    const size_t capacity = std::max<size_t>(rows, all->labels.capacity() * 3 / 2);
    all->labels.reserve(capacity);
    all->dense.reserve(capacity * kCriteoDense);
    all->keys.reserve(capacity * kCriteoSlots);
    all->offsets.reserve(capacity * kCriteoSlots + 1);
  }
  all->labels.resize(rows);
  all->dense.resize(rows * kCriteoDense);
  all->keys.resize(rows * kCriteoSlots);
}

// Moves `rows` rows of `all` from row `from` down to row `to`.
void MoveRows(int64_t from, int64_t to, int64_t rows, Batch* all) {
  std::copy_n(all->labels.begin() + from, rows, all->labels.begin() + to);
  std::copy_n(all->dense.begin() + from * kCriteoDense, rows * kCriteoDense,
              all->dense.begin() + to * kCriteoDense);
  std::copy_n(all->keys.begin() + from * kCriteoSlots, rows * kCriteoSlots,
              all->keys.begin() + to * kCriteoSlots);
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
  FileReader(const CriteoReadOptions& options, ThreadArena* arena, Batch* all,
             BadLineReport* report)
      : options_(options), arena_(arena), all_(all), report_(report) {}

  Status Read(const std::string& path);

 private:
  Status ParseText(std::string_view text);
  Status MergePieces(const std::vector<Piece>& pieces, int64_t base);
  Status AddExample(const BadLine& bad);
  Status SkipLongLine(TextFile* file, ReadBuffer* buffer, size_t* filled);
  Result<size_t> Fill(TextFile* file, ReadBuffer* buffer, size_t filled, bool* eof);
  void ReserveForFile(const std::string& path, size_t parsed_bytes, int64_t parsed_rows);

  const CriteoReadOptions& options_;
  ThreadArena* arena_;
  Batch* all_;
  BadLineReport* report_;
  std::string path_;
  int64_t lines_before_ = 0;  // Lines of the file already parsed.
};

bool IsLineEnd(char c) { return c == '\n' || c == '\r'; }

Status FileReader::Read(const std::string& path) {
  path_ = path;
  lines_before_ = 0;
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<TextFile> file, OpenTextFile(path));
  ReadBuffer buffer(kBlockBytes);
  bool first_block = true;
  size_t filled = 0;
  bool eof = false;
  while (!eof) {
    EMBER_ASSIGN_OR_RETURN(filled, Fill(file.get(), &buffer, filled, &eof));
    std::string_view text(buffer.data.get(), filled);
    if (eof) {
      // Blank lines at the end of a file are not examples.
      while (!text.empty() && IsLineEnd(text.back())) text.remove_suffix(1);
      return ParseText(text);
    }
    const size_t last_newline = text.rfind('\n');
    if (last_newline == std::string_view::npos) {
      EMBER_RETURN_IF_ERROR(SkipLongLine(file.get(), &buffer, &filled));
      continue;
    }
    // Blank lines at the end of the block stay unparsed until we know
    // whether they end the file.
    size_t cut = last_newline + 1;
    const size_t last_content = text.find_last_not_of("\r\n");
    if (last_content != std::string_view::npos && last_content < last_newline) {
      cut = text.find('\n', last_content) + 1;
    }
    const int64_t rows_before = all_->size;
    EMBER_RETURN_IF_ERROR(ParseText(text.substr(0, cut)));
    if (first_block) ReserveForFile(path, cut, all_->size - rows_before);
    first_block = false;
    std::memmove(buffer.data.get(), buffer.data.get() + cut, filled - cut);
    filled -= cut;
  }
  return Status::OK();
}

// Fills buffer[filled..] from the file; sets *eof when the file is exhausted.
Result<size_t> FileReader::Fill(TextFile* file, ReadBuffer* buffer, size_t filled, bool* eof) {
  while (filled < buffer->size) {
    EMBER_ASSIGN_OR_RETURN(const size_t n,
                           file->Read(buffer->data.get() + filled, buffer->size - filled));
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
Status FileReader::SkipLongLine(TextFile* file, ReadBuffer* buffer, size_t* filled) {
  ++lines_before_;
  ++report_->lines_read;
  EMBER_RETURN_IF_ERROR(AddExample(BadLine{lines_before_, kLineTooLong, "more than a block"}));
  ++report_->bad_lines;
  ++report_->by_reason[ReasonName(kLineTooLong)];
  while (true) {
    char* data = buffer->data.get();
    EMBER_ASSIGN_OR_RETURN(const size_t n, file->Read(data, buffer->size));
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

// Reserves room for the rest of a plain file, estimated from the bytes per
// row of its first block, so that the rows are not copied as they grow.
void FileReader::ReserveForFile(const std::string& path, size_t parsed_bytes, int64_t parsed_rows) {
  std::error_code error;
  const uintmax_t file_bytes = std::filesystem::file_size(path, error);
  if (error || path.ends_with(".gz") || parsed_rows == 0) return;
  const double bytes_per_row = static_cast<double>(parsed_bytes) / parsed_rows;
  const int64_t rows =
      all_->size + static_cast<int64_t>(1.02 * (file_bytes - parsed_bytes) / bytes_per_row) + 1;
  all_->labels.reserve(rows);
  all_->dense.reserve(rows * kCriteoDense);
  all_->keys.reserve(rows * kCriteoSlots);
  all_->offsets.reserve(rows * kCriteoSlots + 1);
}

// With kFail, returns the error for `bad`; otherwise keeps it as an example
// while there is room. `bad.line` is a line number within the file. Counting
// is the caller's.
Status FileReader::AddExample(const BadLine& bad) {
  const std::string where = internal::StrCat(path_, ":", bad.line, ": ", ReasonName(bad.reason));
  if (options_.bad_lines == BadLinePolicy::kFail) {
    return Status::InvalidArgument(where, " (got ", bad.got, ")");
  }
  if (report_->first_examples.size() < kMaxBadLineExamples) {
    report_->first_examples.push_back(internal::StrCat(where, " (got ", bad.got, ")"));
  }
  return Status::OK();
}

// Parses `text` (complete lines) straight into the rows of `all_`: first
// the lines of each piece are counted, which gives each piece its rows, then
// the pieces are parsed in parallel; rows left empty by bad lines are closed
// up afterwards.
Status FileReader::ParseText(std::string_view text) {
  std::vector<Piece> pieces = CutIntoPieces(text);
  const int64_t pieces_count = static_cast<int64_t>(pieces.size());
  arena_->Execute([&] {
    ParallelFor(0, pieces_count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) pieces[i].lines = CountLines(pieces[i].text);
    });
  });
  int64_t lines = 0;
  for (Piece& piece : pieces) {
    piece.first_row = lines;
    lines += piece.lines;
  }
  const int64_t base = all_->size;
  ResizeRows(base + lines, all_);
  arena_->Execute([&] {
    ParallelFor(0, pieces_count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t row = base + pieces[i].first_row;
        const RowSink sink{all_->labels.data() + row, all_->dense.data() + row * kCriteoDense,
                           all_->keys.data() + row * kCriteoSlots};
        ParsePiece(options_, sink, &pieces[i]);
      }
    });
  });
  return MergePieces(pieces, base);
}

// Takes the bad lines of the parsed pieces in order, closes the gaps their
// rows left and sets the size and offsets of `all_`.
Status FileReader::MergePieces(const std::vector<Piece>& pieces, int64_t base) {
  int64_t rows = base;
  for (const Piece& piece : pieces) {
    for (const BadLine& bad : piece.examples) {
      EMBER_RETURN_IF_ERROR(AddExample(BadLine{lines_before_ + bad.line, bad.reason, bad.got}));
    }
    report_->lines_read += piece.lines;
    report_->bad_lines += piece.bad_lines;
    for (int reason = 0; reason < kNumReasons; ++reason) {
      if (piece.by_reason[reason] > 0) {
        report_->by_reason[ReasonName(reason)] += piece.by_reason[reason];
      }
    }
    lines_before_ += piece.lines;
    if (rows != base + piece.first_row) MoveRows(base + piece.first_row, rows, piece.rows, all_);
    rows += piece.rows;
  }
  ResizeRows(rows, all_);
  // One key per bag: bag k ends at key k + 1.
  const int64_t first_new_bag = static_cast<int64_t>(all_->offsets.size());
  all_->offsets.resize(rows * kCriteoSlots + 1);
  std::iota(all_->offsets.begin() + first_new_bag, all_->offsets.end(), first_new_bag);
  all_->size = rows;
  return Status::OK();
}

Status CheckBadLines(const BadLineReport& report, const CriteoReadOptions& options) {
  if (report.bad_lines == 0) return Status::OK();
  std::string reasons;
  for (const auto& [reason, count] : report.by_reason) {
    reasons += internal::StrCat(reasons.empty() ? "" : ", ", reason, ": ", count);
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

Result<BadLinePolicy> ParseBadLinePolicy(const std::string& name) {
  if (name == "skip") return BadLinePolicy::kSkip;
  if (name == "fail") return BadLinePolicy::kFail;
  return Status::InvalidArgument("bad line policy must be \"skip\" or \"fail\", got \"", name,
                                 "\"");
}

Result<Dataset> ReadCriteoFiles(const std::vector<std::string>& paths,
                                const CriteoReadOptions& options) {
  if (paths.empty()) return Status::InvalidArgument("no Criteo files to read");
  if (options.slot_bits < 5 || options.slot_bits > 32) {
    // 26 slots need at least 5 slot bits.
    return Status::InvalidArgument("slot_bits must be in [5, 32] for Criteo, got ",
                                   options.slot_bits);
  }
  Batch all;
  all.Clear(kCriteoDense, kCriteoSlots);
  BadLineReport report;
  ThreadArena arena(options.threads);
  FileReader reader(options, &arena, &all, &report);
  for (const std::string& path : paths) EMBER_RETURN_IF_ERROR(reader.Read(path));
  EMBER_RETURN_IF_ERROR(CheckBadLines(report, options));
  return Dataset(std::move(all), std::move(report));
}

}  // namespace ember::io
