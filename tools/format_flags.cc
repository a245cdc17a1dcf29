#include "tools/flag_validators.h"
#include "tools/format_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "io/columnar.h"
#include "io/feature_hash.h"
#include "io/text_format_registry.h"
#include "tools/common_flags.h"

DEFINE_string(format, "auto",
              "Input format (train: --train_data and --test_data; convert: --input): a text "
              "format, columnar, or auto: columnar for files named *.col or *.ember or starting "
              "with the columnar magic, criteo otherwise.");
DEFINE_int32(slot_bits, ember::io::kDefaultSlotBits,
             "High bits of each 64-bit feature key that hold its slot (at most 2^slot_bits "
             "slots; criteo needs >= 5). Use one value for all of a model's data; columnar "
             "files record theirs.");
DEFINE_string(schema, "",
              "csv: the role of each column as a compact spec, e.g. "
              "'label,1-13=dense,14-39=cat' or 'click=label,user=cat,tags=multi:sep=pipe,"
              "ts=ignore' (roles label, dense, cat, multi, ignore; see io/delimited_format.h). "
              "Exactly one of --schema and --schema_file for csv.");
DEFINE_string(schema_file, "",
              "csv: a schema file, one entry per line: 'ref role [option ...]' ('#' starts "
              "a comment).");
DEFINE_string(delimiter, ",",
              "csv: the field delimiter: one byte, or comma, tab, space, semicolon, colon, "
              "pipe.");
DEFINE_bool(header, false,
            "csv: the first line of each file names the columns (the schema may use the "
            "names).");
DEFINE_string(dense_transform, "log1p",
              "csv: transform of dense columns whose schema entry names none: log1p "
              "(log(1 + x) for x > 0, else 0; for counts) or raw.");
DEFINE_string(dense_min, "",
              "csv: clip dense values below this (before the transform) where the schema "
              "entry sets no min; empty: no lower bound.");
DEFINE_string(dense_max, "",
              "csv: clip dense values above this (before the transform) where the schema "
              "entry sets no max; empty: no upper bound.");
DEFINE_string(field_starts, "",
              "libsvm: first feature index of each field, comma-separated (e.g. "
              "'0,957,5039'), one slot per field; empty: every feature in one slot.");
DEFINE_int32(num_fields, 0, "libffm: number of fields, one slot each; required for libffm.");
DEFINE_validator(num_fields, &ember::tools::IsNonNegative32);
DEFINE_bool(require_binary_values, false,
            "libsvm, libffm: a feature value other than 0 or 1 makes the line bad (otherwise "
            "any non-zero value just marks the feature present).");
DEFINE_string(slots, "",
              "slot: sparse slot names in batch order, comma-separated, 'a-b' for a range of "
              "integer names (e.g. '1-26' or 'user,item').");
DEFINE_string(dense_slots, "",
              "slot: dense slot names with optional widths (values taken raw), e.g. "
              "'dense_feature:13,ctr'.");
DEFINE_string(label_slots, "",
              "slot: slots holding the labels; empty: the first token of a line is the label.");
DEFINE_bool(feasign_first, false,
            "slot: pairs are written feasign:slot (PaddleRec slot_dnn data) rather than "
            "slot:feasign.");
DEFINE_bool(ignore_unknown_slots, false,
            "slot: skip tokens of undeclared slots instead of counting the line as bad.");
DEFINE_string(bad_lines, "skip",
              "What a malformed input line does: skip (counted, first few logged) or fail.");
DEFINE_double(max_bad_ratio, 0.01,
              "With --bad_lines=skip, fail when more than this fraction of lines is bad (of "
              "each input file for convert).");
DEFINE_validator(max_bad_ratio, &ember::tools::IsRatio);

namespace ember::tools {
namespace {

bool FlagIsSet(const char* name) {
  const gflags::CommandLineFlagInfo info = gflags::GetCommandLineFlagInfoOrDie(name);
  return info.current_value != info.default_value;
}

Result<std::optional<double>> ParseBound(const char* flag, const std::string& text) {
  if (text.empty()) return std::optional<double>();
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
    return Status::InvalidArgument("--", flag, "=", text, ": expected a number");
  }
  return std::optional<double>(value);
}

// A flag of a text format's options: its name (the option's key,
// io::FormatOption) and how its value goes into a spec. A new format's
// flags are DEFINEd above and get a row here.
struct FormatFlag {
  const char* name;
  Status (*apply)(io::FormatSpec* spec);
};

constexpr FormatFlag kFormatFlags[] = {
    {"schema", [](io::FormatSpec* s) -> Status { s->schema = FLAGS_schema; return Status::OK(); }},
    {"schema_file",
     [](io::FormatSpec* s) -> Status { s->schema_file = FLAGS_schema_file; return Status::OK(); }},
    {"delimiter", [](io::FormatSpec* s) -> Status { s->delimiter = FLAGS_delimiter; return Status::OK(); }},
    {"header", [](io::FormatSpec* s) -> Status { s->header = FLAGS_header; return Status::OK(); }},
    {"dense_transform",
     [](io::FormatSpec* s) -> Status {
       Result<io::DenseTransform> transform = io::ParseDenseTransform(FLAGS_dense_transform);
       if (!transform.ok()) {
         return Status::InvalidArgument("--dense_transform=", FLAGS_dense_transform,
                                        ": expected log1p or raw");
       }
       s->dense_defaults.transform = *transform;
       return Status::OK();
     }},
    {"dense_min",
     [](io::FormatSpec* s) -> Status {
       EMBER_ASSIGN_OR_RETURN(s->dense_defaults.min, ParseBound("dense_min", FLAGS_dense_min));
       return Status::OK();
     }},
    {"dense_max",
     [](io::FormatSpec* s) -> Status {
       EMBER_ASSIGN_OR_RETURN(s->dense_defaults.max, ParseBound("dense_max", FLAGS_dense_max));
       return Status::OK();
     }},
    {"field_starts",
     [](io::FormatSpec* s) -> Status { s->field_starts = FLAGS_field_starts; return Status::OK(); }},
    {"num_fields", [](io::FormatSpec* s) -> Status { s->num_fields = FLAGS_num_fields; return Status::OK(); }},
    {"require_binary_values",
     [](io::FormatSpec* s) -> Status {
       s->require_binary_values = FLAGS_require_binary_values;
       return Status::OK();
     }},
    {"slots", [](io::FormatSpec* s) -> Status { s->slots = FLAGS_slots; return Status::OK(); }},
    {"dense_slots",
     [](io::FormatSpec* s) -> Status { s->dense_slots = FLAGS_dense_slots; return Status::OK(); }},
    {"label_slots",
     [](io::FormatSpec* s) -> Status { s->label_slots = FLAGS_label_slots; return Status::OK(); }},
    {"feasign_first",
     [](io::FormatSpec* s) -> Status { s->feasign_first = FLAGS_feasign_first; return Status::OK(); }},
    {"ignore_unknown_slots",
     [](io::FormatSpec* s) -> Status {
       s->ignore_unknown_slots = FLAGS_ignore_unknown_slots;
       return Status::OK();
     }},
};

// Columnar files read in chunks of this many rows when only a share is kept.
constexpr int64_t kShareChunkRows = 1 << 16;

Result<io::Dataset> ReadColumnarFiles(const std::vector<std::string>& paths, int* slot_bits,
                                      int64_t keep_every, int64_t keep_offset) {
  if (paths.empty()) return Status::InvalidArgument("no columnar files to read");
  io::Dataset all;
  io::ColumnarShape first;
  int64_t rows_before = 0;  // Rows of the files before this one.
  for (size_t i = 0; i < paths.size(); ++i) {
    EMBER_ASSIGN_OR_RETURN(auto file, io::OpenColumnar(paths[i]));
    const io::ColumnarShape& shape = file->shape();
    if (i == 0) {
      first = shape;
    } else if (!(shape == first)) {
      return Status::InvalidArgument(paths[i], ": ", shape.num_labels, " labels, ", shape.num_dense,
                                     " dense, ", shape.num_slots, " slots and ", shape.slot_bits,
                                     " slot bits per row, but ", paths[0], " has ",
                                     first.num_labels, ", ", first.num_dense, ", ", first.num_slots,
                                     " and ", first.slot_bits);
    }
    io::Batch rows;
    if (keep_every > 1) {
      // A rank's share: every keep_every-th row of the files, read in chunks.
      io::Batch share, chunk;
      share.Clear(shape.num_dense, shape.num_slots, shape.num_labels);
      for (int64_t begin = 0; begin < file->rows(); begin += kShareChunkRows) {
        const int64_t end = std::min(file->rows(), begin + kShareChunkRows);
        EMBER_RETURN_IF_ERROR(file->ReadRows(begin, end, &chunk));
        io::AppendEveryNth(chunk, rows_before + begin, keep_every, keep_offset, &share);
      }
      rows_before += file->rows();
      rows = std::move(share);
    } else {
      EMBER_RETURN_IF_ERROR(file->ReadRows(0, file->rows(), &rows));
    }
    if (i == 0) {
      all = io::Dataset(std::move(rows));
    } else {
      all.Append(io::Dataset(std::move(rows)));
    }
  }
  if (FlagIsSet("slot_bits") && FLAGS_slot_bits != first.slot_bits) {
    return Status::InvalidArgument("--slot_bits=", FLAGS_slot_bits, " but ", paths[0],
                                   " was written with ", first.slot_bits, " slot bits");
  }
  *slot_bits = first.slot_bits;
  return all;
}

}  // namespace

Result<io::FormatSpec> FormatSpecFromFlags() {
  io::FormatSpec spec;
  if (FLAGS_format == "auto") {
    spec.name = "criteo";
  } else if (io::DefaultTextFormatRegistry().Find(FLAGS_format).ok()) {
    spec.name = FLAGS_format;
  } else {
    std::string names;
    for (const std::string& name : io::DefaultTextFormatRegistry().Names()) {
      names += (names.empty() ? "" : ", ") + name;
    }
    return Status::InvalidArgument("--format=", FLAGS_format, " is not a text format (", names,
                                   ")");
  }
  spec.slot_bits = FLAGS_slot_bits;
  static const bool every_option_bound = [] {
    std::vector<std::string> names;
    for (const FormatFlag& flag : kFormatFlags) names.push_back(flag.name);
    return names == io::TextFormatOptionKeys();
  }();
  CHECK(every_option_bound) << "every option key of a registered text format has one row of "
                               "kFormatFlags, in FormatOptions() order";
  for (const FormatFlag& flag : kFormatFlags) EMBER_RETURN_IF_ERROR(flag.apply(&spec));
  return spec;
}

bool LooksColumnar(const std::string& path) {
  if (path.ends_with(".col") || path.ends_with(".ember")) return true;
  std::ifstream file(path, std::ios::binary);
  char magic[8] = {};
  return file.read(magic, sizeof(magic)) && std::string_view(magic, 8) == "EMBERCOL";
}

Result<InputFormat> ResolveInputFormat(const std::vector<std::string>& paths) {
  InputFormat format;
  if (FLAGS_format == "columnar") {
    format.columnar = true;
  } else if (FLAGS_format == "auto") {
    std::string columnar_path, text_path;
    for (const std::string& path : paths) {
      (LooksColumnar(path) ? columnar_path : text_path) = path;
    }
    if (!columnar_path.empty() && !text_path.empty()) {
      return Status::InvalidArgument("--format=auto: ", columnar_path, " is columnar but ",
                                     text_path, " is not; give files of one format");
    }
    format.columnar = !columnar_path.empty();
  }
  if (format.columnar) {
    for (const FormatFlag& flag : kFormatFlags) {
      if (FlagIsSet(flag.name)) {
        return Status::InvalidArgument("--", flag.name,
                                       " describes a text format; it does not apply "
                                       "to columnar input");
      }
    }
    return format;
  }
  EMBER_ASSIGN_OR_RETURN(format.text, FormatSpecFromFlags());
  return format;
}

Result<io::TextReadOptions> TextReadOptionsFromFlags() {
  io::TextReadOptions options;
  Result<io::BadLinePolicy> policy = io::ParseBadLinePolicy(FLAGS_bad_lines);
  if (!policy.ok()) return policy.status().WithContext("--bad_lines");
  options.bad_lines = *policy;
  options.max_bad_ratio = FLAGS_max_bad_ratio;
  options.threads = FLAGS_threads;
  return options;
}

Result<InputData> ReadInput(const std::vector<std::string>& paths,
                            const io::TextReadOptions& options) {
  EMBER_ASSIGN_OR_RETURN(const InputFormat format, ResolveInputFormat(paths));
  InputData input;
  input.format = format.name();
  if (format.columnar) {
    EMBER_ASSIGN_OR_RETURN(input.data, ReadColumnarFiles(paths, &input.slot_bits,
                                                         options.keep_every, options.keep_offset));
    return input;
  }
  Result<std::unique_ptr<io::TextFormat>> text = io::MakeTextFormat(format.text);
  if (!text.ok()) {
    return text.status().WithContext("--format=" + FLAGS_format +
                                     (FLAGS_format == "auto" ? " (read as criteo)" : ""));
  }
  EMBER_ASSIGN_OR_RETURN(input.data, io::ReadTextFiles(paths, **text, options));
  input.slot_bits = format.text.slot_bits;
  return input;
}

Result<InputStream> OpenInputStream(const std::vector<std::string>& paths,
                                    io::StreamReaderOptions options) {
  EMBER_ASSIGN_OR_RETURN(const io::TextReadOptions read, TextReadOptionsFromFlags());
  options.bad_lines = read.bad_lines;
  options.max_bad_ratio = read.max_bad_ratio;
  EMBER_ASSIGN_OR_RETURN(const InputFormat format, ResolveInputFormat(paths));
  InputStream input;
  input.format = format.name();
  if (format.columnar) {
    if (paths.empty()) return Status::InvalidArgument("no columnar files to read");
    // OpenColumnar checks that every file has the first one's shape.
    EMBER_ASSIGN_OR_RETURN(auto first, io::OpenColumnar(paths.front()));
    input.slot_bits = first->shape().slot_bits;
    if (FlagIsSet("slot_bits") && FLAGS_slot_bits != input.slot_bits) {
      return Status::InvalidArgument("--slot_bits=", FLAGS_slot_bits, " but ", paths.front(),
                                     " was written with ", input.slot_bits, " slot bits");
    }
    EMBER_ASSIGN_OR_RETURN(input.reader, io::StreamReader::OpenColumnar(paths, options));
    return input;
  }
  Result<std::unique_ptr<io::TextFormat>> text = io::MakeTextFormat(format.text);
  if (!text.ok()) {
    return text.status().WithContext("--format=" + FLAGS_format +
                                     (FLAGS_format == "auto" ? " (read as criteo)" : ""));
  }
  EMBER_ASSIGN_OR_RETURN(input.reader, io::StreamReader::OpenText(paths, **text, options));
  input.slot_bits = format.text.slot_bits;
  return input;
}

}  // namespace ember::tools
