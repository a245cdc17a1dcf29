#pragma once

// The index of a StreamReader's input (io/stream_reader.h): every file cut
// into pieces, the units that the reader parses, shuffles and shards.
//
// A text file is cut at newlines by a rule that depends only on its bytes and
// the piece size P: a line belongs to nominal chunk k when its first byte
// lies in [data_begin + kP, data_begin + (k + 1)P) (data_begin is the first
// byte after the header line); a piece is a maximal run of consecutive lines
// of one chunk, except that a line longer than kMaxLineBytes is a piece of
// its own that is never read (it is a bad line whatever it holds). The
// pieces of a plain file are found by scanning its chunks in parallel; a
// ".gz" file is decompressed once, front to back. Blank lines at the end of a
// file are not lines (as in ReadTextFiles). A columnar file is cut into row
// ranges of P rows.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/threads.h"
#include "io/columnar.h"
#include "io/text_format.h"

namespace ember::io::internal {

struct IndexedPiece {
  int32_t file = 0;
  // Text: bytes [begin, end) of the file (of its decompressed data for .gz);
  // they hold `lines` complete lines, the last one without its newline at
  // the end of the file. Columnar: rows [begin, end).
  int64_t begin = 0;
  int64_t end = 0;
  // Text: the line number in the file (from 1, a header included) of the
  // piece's first line.
  int64_t first_line = 0;
  // Text: lines, good and bad; columnar: rows.
  int64_t lines = 0;
  // Text: one line over kMaxLineBytes (text_reader.h), not read; its length
  // without the line ending is line_bytes.
  bool too_long = false;
  int64_t line_bytes = 0;
};

struct IndexedFile {
  std::string path;
  bool gzip = false;
  int64_t bytes = 0;  // Size on disk.
  int64_t lines = 0;  // Lines (text) or rows (columnar), headers excluded.
  // Its pieces are pieces[first_piece, first_piece + num_pieces).
  int64_t first_piece = 0;
  int64_t num_pieces = 0;
  // Text: the parser made from the file's header; null for a file without
  // lines. Columnar: the open file.
  std::unique_ptr<LineParser> parser;
  std::unique_ptr<ColumnarFile> columnar;
};

// Thread safety: immutable once built; read concurrently by the reader's
// threads.
struct InputIndex {
  bool columnar = false;
  std::string format_name;  // The text format's name, or "columnar".
  TextLayout layout;
  int64_t piece_size = 0;  // Bytes (text) or rows (columnar).
  std::vector<IndexedFile> files;
  std::vector<IndexedPiece> pieces;
  // Of the files' names (without directories), sizes and line or row counts,
  // in order: what a resumed reader must find again.
  uint64_t fingerprint = 0;
};

// Indexes text files of `format` with pieces of `piece_bytes`, on the threads
// of `arena`. Errors as ReadTextFiles: no paths (InvalidArgument), NotFound,
// a directory (InvalidArgument), IOError, DataLoss for a truncated or corrupt
// gzip file, a header the format rejects or a header line longer than 64 MiB
// (InvalidArgument), each naming the file; the first in file order wins.
Result<std::unique_ptr<InputIndex>> IndexTextFiles(const std::vector<std::string>& paths,
                                                   const TextFormat& format, int64_t piece_bytes,
                                                   ThreadArena* arena);

// Opens columnar files (errors as OpenColumnar) and cuts them into row ranges
// of `piece_rows`. InvalidArgument, naming the file, if a file's shape
// differs from the first file's; InvalidArgument if there are no paths.
Result<std::unique_ptr<InputIndex>> IndexColumnarFiles(const std::vector<std::string>& paths,
                                                       int64_t piece_rows,
                                                       const ColumnarReadOptions& options);

}  // namespace ember::io::internal
