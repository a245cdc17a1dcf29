#include "io/internal/stream_index.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <utility>

#include "core/random.h"
#include "io/internal/mapped_file.h"
#include "io/internal/text_parsing.h"
#include "core/checksum.h"
#include "io/text_file.h"
#include "io/text_reader.h"

namespace ember::io::internal {
namespace {

using ::ember::internal::StrCat;

// A header line must end within this many bytes (ReadTextFiles' block).
constexpr size_t kMaxHeaderBytes = size_t{64} << 20;
// Decompressed bytes a .gz file is scanned in.
constexpr size_t kGzipWindowBytes = size_t{4} << 20;

bool IsLineEnd(char c) { return c == '\n' || c == '\r'; }

// Groups lines, given in file order, into pieces by the rule of the header.
class PieceBuilder {
 public:
  PieceBuilder(int32_t file, int64_t data_begin, int64_t piece_bytes,
               std::vector<IndexedPiece>* out)
      : file_(file), data_begin_(data_begin), piece_bytes_(piece_bytes), out_(out) {}

  // A line starting at byte `start` whose successor starts at `next_start`
  // (the end of the data for the last line), `content_bytes` long without
  // its line ending.
  void AddLine(int64_t start, int64_t next_start, int64_t content_bytes) {
    const bool too_long = content_bytes > static_cast<int64_t>(kMaxLineBytes);
    const int64_t chunk = (start - data_begin_) / piece_bytes_;
    if (!open_ || too_long || current_.too_long || chunk != chunk_) {
      Close();
      current_ = IndexedPiece{.file = file_, .begin = start, .too_long = too_long};
      if (too_long) current_.line_bytes = content_bytes;
      chunk_ = chunk;
      open_ = true;
    }
    current_.end = next_start;
    ++current_.lines;
  }
  void Finish() { Close(); }

 private:
  void Close() {
    if (open_) out_->push_back(current_);
    open_ = false;
  }

  const int32_t file_;
  const int64_t data_begin_;
  const int64_t piece_bytes_;
  std::vector<IndexedPiece>* out_;
  bool open_ = false;
  IndexedPiece current_;
  int64_t chunk_ = 0;
};

// The pieces of nominal chunk k of `data`, whose lines are
// [data_begin, data_end) and whose last byte is not a line ending.
std::vector<IndexedPiece> ScanChunk(const char* data, int64_t data_begin, int64_t data_end,
                                    int64_t piece_bytes, int32_t file, int64_t k) {
  std::vector<IndexedPiece> pieces;
  const int64_t chunk_begin = data_begin + k * piece_bytes;
  // Not chunk_begin + piece_bytes, which overflows for a huge piece size.
  const int64_t chunk_end = chunk_begin + std::min(piece_bytes, data_end - chunk_begin);
  int64_t start = data_begin;
  if (k > 0) {
    // The first line starting in the chunk follows a newline in
    // [chunk_begin - 1, chunk_end - 1).
    const void* newline =
        std::memchr(data + chunk_begin - 1, '\n', static_cast<size_t>(chunk_end - chunk_begin));
    if (newline == nullptr) return pieces;
    start = static_cast<const char*>(newline) - data + 1;
  }
  PieceBuilder builder(file, data_begin, piece_bytes, &pieces);
  while (start < chunk_end) {
    const void* newline = std::memchr(data + start, '\n', static_cast<size_t>(data_end - start));
    if (newline == nullptr) {
      builder.AddLine(start, data_end, data_end - start);
      break;
    }
    const int64_t end = static_cast<const char*>(newline) - data;
    const bool carriage_return = end > start && data[end - 1] == '\r';
    builder.AddLine(start, end + 1, end - start - (carriage_return ? 1 : 0));
    start = end + 1;
  }
  builder.Finish();
  return pieces;
}

// The parser of a file whose header line (without its newline) is `header`.
Result<std::unique_ptr<LineParser>> MakeParser(const TextFormat& format, std::string_view header,
                                               const std::string& path) {
  if (!header.empty() && header.back() == '\r') header.remove_suffix(1);
  if (header.starts_with(kUtf8ByteOrderMark)) header.remove_prefix(kUtf8ByteOrderMark.size());
  Result<std::unique_ptr<LineParser>> parser = format.NewLineParser(header);
  if (!parser.ok()) {
    return parser.status().WithContext(format.has_header() ? path + ":1" : path);
  }
  return std::move(*parser);
}

Status IndexPlainFile(const TextFormat& format, int64_t piece_bytes, int32_t id, IndexedFile* file,
                      std::vector<IndexedPiece>* pieces) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped,
                         MappedFile::Open(file->path, MappedFile::Access::kSequential));
  const char* data = reinterpret_cast<const char*>(mapped->data());
  const int64_t size = mapped->size();
  file->bytes = size;
  int64_t data_begin = 0;
  std::string_view header;
  if (!format.has_header() && std::string_view(data, size).starts_with(kUtf8ByteOrderMark)) {
    data_begin = static_cast<int64_t>(kUtf8ByteOrderMark.size());  // Not part of line 1.
  }
  if (format.has_header()) {
    if (size == 0) return Status::OK();  // No header, no lines.
    const size_t scan = std::min<size_t>(size, kMaxHeaderBytes);
    const void* newline = std::memchr(data, '\n', scan);
    if (newline == nullptr && static_cast<size_t>(size) > kMaxHeaderBytes) {
      return Status::InvalidArgument(file->path, ":1: header line longer than ",
                                     kMaxHeaderBytes >> 20, " MiB");
    }
    const int64_t header_end = newline ? static_cast<const char*>(newline) - data : size;
    header = std::string_view(data, header_end);
    data_begin = newline ? header_end + 1 : size;
  }
  EMBER_ASSIGN_OR_RETURN(file->parser, MakeParser(format, header, file->path));
  // Blank lines at the end of a file are not lines.
  int64_t data_end = size;
  while (data_end > data_begin && IsLineEnd(data[data_end - 1])) --data_end;
  // Rounded up without adding piece_bytes - 1, which overflows for a huge piece size.
  const int64_t data_bytes = data_end - data_begin;
  const int64_t chunks = data_bytes / piece_bytes + (data_bytes % piece_bytes != 0 ? 1 : 0);
  std::vector<std::vector<IndexedPiece>> by_chunk(chunks);
  ParallelFor(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      by_chunk[k] = ScanChunk(data, data_begin, data_end, piece_bytes, id, k);
    }
  });
  for (const auto& chunk : by_chunk) pieces->insert(pieces->end(), chunk.begin(), chunk.end());
  return Status::OK();
}

// Follows the lines of decompressed data given window by window, and at the
// end drops the blank lines that end the file (which only then are known).
class GzipLineScanner {
 public:
  GzipLineScanner(int32_t file, int64_t data_begin, int64_t piece_bytes,
                  std::vector<IndexedPiece>* pieces)
      : pieces_(pieces), builder_(file, data_begin, piece_bytes, pieces), line_start_(data_begin) {}

  // The `n` bytes at `data` are those at decompressed offset `offset`.
  void Feed(const char* data, size_t n, int64_t offset) {
    size_t pos = 0;
    while (pos < n) {
      const void* newline = std::memchr(data + pos, '\n', n - pos);
      const size_t segment_end = newline ? static_cast<const char*>(newline) - data : n;
      if (segment_end > pos) {
        size_t last = segment_end;
        while (last > pos && data[last - 1] == '\r') --last;
        if (last > pos) {
          has_content_ = true;
          content_end_ = offset + static_cast<int64_t>(last);
        }
        ends_with_cr_ = data[segment_end - 1] == '\r';
      }
      if (newline == nullptr) break;
      const int64_t line_end = offset + static_cast<int64_t>(segment_end);
      EndLine(line_end, line_end + 1);
      pos = segment_end + 1;
    }
  }

  // The data ended at decompressed offset `end`.
  void Finish(int64_t end) {
    if (line_start_ < end) EndLine(end, end);
    builder_.Finish();
    if (!any_content_) {
      pieces_->clear();
      return;
    }
    // Lines that start at or after the end of the last content are the
    // blank lines that end the file.
    int64_t blank = trailing_blank_lines_;
    while (pieces_->back().begin >= file_content_end_) {
      blank -= pieces_->back().lines;
      pieces_->pop_back();
    }
    IndexedPiece& last = pieces_->back();
    DCHECK_GE(blank, 0) << "trailing blank lines are counted in the pieces";
    last.lines -= blank;
    last.end = file_content_end_;
    // Without its trailing '\r's the last line may be short enough.
    if (last.too_long) {
      last.line_bytes = last.end - last.begin;
      last.too_long = last.line_bytes > static_cast<int64_t>(kMaxLineBytes);
    }
  }

 private:
  void EndLine(int64_t line_end, int64_t next_start) {
    builder_.AddLine(line_start_, next_start,
                     line_end - line_start_ - (ends_with_cr_ && line_end > line_start_ ? 1 : 0));
    if (has_content_) {
      any_content_ = true;
      file_content_end_ = content_end_;
      trailing_blank_lines_ = 0;
    } else {
      ++trailing_blank_lines_;
    }
    line_start_ = next_start;
    has_content_ = false;
    ends_with_cr_ = false;
  }

  std::vector<IndexedPiece>* pieces_;
  PieceBuilder builder_;
  int64_t line_start_;
  bool has_content_ = false;      // Of the current line: a byte other than '\r'.
  int64_t content_end_ = 0;       // Of the current line: after its last such byte.
  bool ends_with_cr_ = false;     // Of the current line so far.
  bool any_content_ = false;      // Of the file.
  int64_t file_content_end_ = 0;  // After the last byte that is not a line ending.
  int64_t trailing_blank_lines_ = 0;
};

Status IndexGzipFile(const TextFormat& format, int64_t piece_bytes, int32_t id, IndexedFile* file,
                     std::vector<IndexedPiece>* pieces) {
  std::error_code error;
  file->bytes = static_cast<int64_t>(std::filesystem::file_size(file->path, error));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<TextFile> text, OpenTextFile(file->path));
  const auto buffer = std::make_unique_for_overwrite<char[]>(kGzipWindowBytes);
  std::optional<GzipLineScanner> scanner;
  if (!format.has_header()) {
    EMBER_ASSIGN_OR_RETURN(file->parser, MakeParser(format, "", file->path));
  }
  std::string header;
  int64_t offset = 0;
  while (true) {
    EMBER_ASSIGN_OR_RETURN(const size_t n, text->Read(buffer.get(), kGzipWindowBytes));
    if (n == 0) break;
    size_t pos = 0;
    if (!format.has_header() && !scanner.has_value()) {
      // The first window (a gzip window holds far more than 3 bytes): a byte
      // order mark there is not part of line 1.
      if (std::string_view(buffer.get(), n).starts_with(kUtf8ByteOrderMark)) {
        pos = kUtf8ByteOrderMark.size();
      }
      scanner.emplace(id, static_cast<int64_t>(pos), piece_bytes, pieces);
    }
    if (!scanner.has_value()) {
      const void* newline = std::memchr(buffer.get(), '\n', n);
      pos = newline ? static_cast<const char*>(newline) - buffer.get() + 1 : n;
      header.append(buffer.get(), newline ? pos - 1 : pos);
      if (newline != nullptr) {
        EMBER_ASSIGN_OR_RETURN(file->parser, MakeParser(format, header, file->path));
        scanner.emplace(id, offset + static_cast<int64_t>(pos), piece_bytes, pieces);
      } else if (header.size() >= kMaxHeaderBytes) {
        return Status::InvalidArgument(file->path, ":1: header line longer than ",
                                       kMaxHeaderBytes >> 20, " MiB");
      }
    }
    if (scanner.has_value() && pos < n) scanner->Feed(buffer.get() + pos, n - pos, offset + pos);
    offset += static_cast<int64_t>(n);
  }
  if (!scanner.has_value()) {
    if (offset == 0) return Status::OK();  // An empty file of a header format.
    EMBER_ASSIGN_OR_RETURN(file->parser, MakeParser(format, header, file->path));
    return Status::OK();  // Only a header.
  }
  scanner->Finish(offset);
  return Status::OK();
}

uint64_t FileFingerprint(const std::string& path, int64_t bytes, int64_t lines) {
  const std::string name = std::filesystem::path(path).filename().string();
  return HashCombine(HashCombine(XxHash64(name.data(), name.size()), static_cast<uint64_t>(bytes)),
                     static_cast<uint64_t>(lines));
}

// Numbers the pieces of each file, sets the files' piece ranges and line
// counts and the fingerprint.
void FinishIndex(std::vector<std::vector<IndexedPiece>> by_file, bool has_header,
                 InputIndex* index) {
  uint64_t fingerprint = HashCombine(index->files.size(), index->columnar ? 1 : 0);
  for (size_t f = 0; f < index->files.size(); ++f) {
    IndexedFile& file = index->files[f];
    file.first_piece = static_cast<int64_t>(index->pieces.size());
    file.num_pieces = static_cast<int64_t>(by_file[f].size());
    // A header is line 1.
    int64_t line = has_header ? 2 : 1;
    for (IndexedPiece& piece : by_file[f]) {
      piece.first_line = line;
      line += piece.lines;
      file.lines += piece.lines;
      index->pieces.push_back(piece);
    }
    fingerprint = HashCombine(fingerprint, FileFingerprint(file.path, file.bytes, file.lines));
  }
  index->fingerprint = fingerprint;
}

}  // namespace

Result<std::unique_ptr<InputIndex>> IndexTextFiles(const std::vector<std::string>& paths,
                                                   const TextFormat& format, int64_t piece_bytes,
                                                   ThreadArena* arena) {
  if (paths.empty()) return Status::InvalidArgument("no ", format.name(), " files to read");
  CHECK_GT(piece_bytes, 0) << "pieces need bytes";
  auto index = std::make_unique<InputIndex>();
  index->format_name = format.name();
  index->layout = format.layout();
  index->piece_size = piece_bytes;
  index->files.resize(paths.size());
  std::vector<std::vector<IndexedPiece>> by_file(paths.size());
  std::vector<Status> status(paths.size());
  arena->Execute([&] {
    ParallelFor(0, static_cast<int64_t>(paths.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t f = begin; f < end; ++f) {
        IndexedFile& file = index->files[f];
        file.path = paths[f];
        file.gzip = file.path.ends_with(".gz");
        const int32_t id = static_cast<int32_t>(f);
        status[f] = file.gzip ? IndexGzipFile(format, piece_bytes, id, &file, &by_file[f])
                              : IndexPlainFile(format, piece_bytes, id, &file, &by_file[f]);
      }
    });
  });
  for (const Status& s : status) EMBER_RETURN_IF_ERROR(s);
  FinishIndex(std::move(by_file), format.has_header(), index.get());
  return index;
}

Result<std::unique_ptr<InputIndex>> IndexColumnarFiles(const std::vector<std::string>& paths,
                                                       int64_t piece_rows,
                                                       const ColumnarReadOptions& options) {
  if (paths.empty()) return Status::InvalidArgument("no columnar files to read");
  CHECK_GT(piece_rows, 0) << "pieces need rows";
  auto index = std::make_unique<InputIndex>();
  index->columnar = true;
  index->format_name = "columnar";
  index->piece_size = piece_rows;
  index->files.resize(paths.size());
  std::vector<std::vector<IndexedPiece>> by_file(paths.size());
  for (size_t f = 0; f < paths.size(); ++f) {
    IndexedFile& file = index->files[f];
    file.path = paths[f];
    EMBER_ASSIGN_OR_RETURN(file.columnar, OpenColumnar(file.path, options));
    const ColumnarShape& shape = file.columnar->shape();
    const TextLayout layout{shape.num_labels, shape.num_dense, shape.num_slots};
    if (f == 0) {
      index->layout = layout;
    } else if (!(shape == index->files[0].columnar->shape())) {
      // Keys hashed with other slot bits would mean other features.
      const ColumnarShape& first = index->files[0].columnar->shape();
      return Status::InvalidArgument(
          file.path, ": rows of ", shape.num_labels, " labels, ", shape.num_dense, " dense, ",
          shape.num_slots, " slots, ", shape.slot_bits, " slot bits, unlike ", paths[0], " (",
          first.num_labels, " labels, ", first.num_dense, " dense, ", first.num_slots,
          " slots, ", first.slot_bits, " slot bits)");
    }
    file.bytes = file.columnar->file_bytes();
    const int64_t rows = file.columnar->rows();
    int64_t end = 0;
    for (int64_t begin = 0; begin < rows; begin = end) {
      end = begin + std::min(piece_rows, rows - begin);  // No overflow for a huge piece size.
      by_file[f].push_back(IndexedPiece{
          .file = static_cast<int32_t>(f), .begin = begin, .end = end, .lines = end - begin});
    }
  }
  FinishIndex(std::move(by_file), /*has_header=*/false, index.get());
  return index;
}

}  // namespace ember::io::internal
