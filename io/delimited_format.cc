#include "io/delimited_format.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "core/file.h"
#include "io/internal/text_parsing.h"

namespace ember::io {
namespace {

using ::ember::internal::StrCat;
using internal::ParseFiniteDouble;
using internal::ParseUnitLabel;
using internal::Quote;
using internal::SplitFields;

// Column indices past this are a mistake, not a wide file.
constexpr int kMaxColumnIndex = 65535;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && internal::IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && internal::IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Parses a column index, "0" to "65535".
Result<int> ParseIndex(std::string_view text) {
  uint64_t index = 0;
  if (!internal::ParseUint64(text, &index) || index > kMaxColumnIndex) {
    return Status::InvalidArgument("column index out of range: \"", text, "\" (at most ",
                                   kMaxColumnIndex, ")");
  }
  return static_cast<int>(index);
}

// Fills the column reference of `column` from `ref`: a name, an index, a
// range "a-b" or "-" (the next column).
Status ParseRef(std::string_view ref, ColumnSpec* column) {
  if (ref == "-" || ref.empty()) return Status::OK();
  const size_t dash = ref.find('-');
  if (AllDigits(ref)) {
    EMBER_ASSIGN_OR_RETURN(column->first_index, ParseIndex(ref));
    column->last_index = column->first_index;
    return Status::OK();
  }
  if (dash != std::string_view::npos && AllDigits(ref.substr(0, dash)) &&
      AllDigits(ref.substr(dash + 1))) {
    EMBER_ASSIGN_OR_RETURN(column->first_index, ParseIndex(ref.substr(0, dash)));
    EMBER_ASSIGN_OR_RETURN(column->last_index, ParseIndex(ref.substr(dash + 1)));
    if (column->first_index > column->last_index) {
      return Status::InvalidArgument("column range \"", ref, "\" is empty");
    }
    return Status::OK();
  }
  column->name = std::string(ref);
  return Status::OK();
}

Result<ColumnRole> ParseRole(std::string_view role) {
  if (role == "label") return ColumnRole::kLabel;
  if (role == "dense") return ColumnRole::kDense;
  if (role == "cat" || role == "categorical") return ColumnRole::kCategorical;
  if (role == "multi") return ColumnRole::kMulti;
  if (role == "ignore") return ColumnRole::kIgnore;
  return Status::InvalidArgument("unknown role \"", role,
                                 "\" (expected label, dense, cat, multi or ignore)");
}

Result<double> ParseOptionNumber(std::string_view option, std::string_view value) {
  double number = 0.0;
  if (!ParseFiniteDouble(value, &number)) {
    return Status::InvalidArgument("option ", option, " needs a number, got \"", value, "\"");
  }
  return number;
}

// Applies one option ("log1p", "min=0", "sep=pipe", ...) to `column`.
Status ParseOption(std::string_view option, ColumnSpec* column) {
  const size_t equals = option.find('=');
  const std::string_view key = option.substr(0, equals);
  const std::string_view value =
      equals == std::string_view::npos ? std::string_view() : option.substr(equals + 1);
  auto require = [&](ColumnRole role, const char* role_name) -> Status {
    if (column->role == role) return Status::OK();
    return Status::InvalidArgument("option \"", option, "\" applies to ", role_name,
                                   " columns only");
  };
  if (option == "log1p" || option == "raw") {
    EMBER_RETURN_IF_ERROR(require(ColumnRole::kDense, "dense"));
    column->transform = option == "raw" ? DenseTransform::kRaw : DenseTransform::kLog1p;
  } else if (key == "min" || key == "max") {
    EMBER_RETURN_IF_ERROR(require(ColumnRole::kDense, "dense"));
    EMBER_ASSIGN_OR_RETURN(const double bound, ParseOptionNumber(key, value));
    (key == "min" ? column->min : column->max) = bound;
  } else if (key == "threshold") {
    EMBER_RETURN_IF_ERROR(require(ColumnRole::kLabel, "label"));
    EMBER_ASSIGN_OR_RETURN(column->threshold, ParseOptionNumber(key, value));
  } else if (key == "sep") {
    EMBER_RETURN_IF_ERROR(require(ColumnRole::kMulti, "multi"));
    EMBER_ASSIGN_OR_RETURN(column->inner_delimiter, ParseDelimiter(value));
  } else {
    return Status::InvalidArgument("unknown option \"", option,
                                   "\" (expected log1p, raw, min=, max=, threshold= or sep=)");
  }
  if (column->min && column->max && *column->min > *column->max) {
    return Status::InvalidArgument("min ", *column->min, " is above max ", *column->max);
  }
  return Status::OK();
}

// Builds an entry from its reference, role and options.
Result<ColumnSpec> ParseEntry(std::string_view ref, std::string_view role,
                              const std::vector<std::string_view>& options) {
  ColumnSpec column;
  EMBER_RETURN_IF_ERROR(ParseRef(ref, &column));
  EMBER_ASSIGN_OR_RETURN(column.role, ParseRole(role));
  for (const std::string_view option : options) {
    EMBER_RETURN_IF_ERROR(ParseOption(option, &column));
  }
  return column;
}

// Checks what concerns the schema as a whole.
Status CheckSchema(const DelimitedSchema& schema) {
  std::set<std::string> names;
  bool has_label = false;
  for (const ColumnSpec& column : schema.columns) {
    has_label = has_label || column.role == ColumnRole::kLabel;
    if (column.name.empty()) continue;
    if (!names.insert(column.name).second) {
      return Status::InvalidArgument("schema names column \"", column.name, "\" twice");
    }
  }
  if (!has_label) return Status::InvalidArgument("schema has no label column");
  return Status::OK();
}

// Splits `text` at `delimiter` into all its fields.
std::vector<std::string_view> SplitAll(std::string_view text, char delimiter) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(delimiter, start);
    if (end == std::string_view::npos) break;
    fields.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  fields.push_back(text.substr(start));
  return fields;
}

// One column the parser reads, with everything resolved.
struct BoundColumn {
  int column = 0;  // Index of its field in a line.
  ColumnRole role = ColumnRole::kIgnore;
  DenseTransform transform = DenseTransform::kLog1p;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  std::optional<double> threshold;
  char inner_delimiter = '|';
  std::string description;  // "column 3" or "\"ip\"", for messages.
};

// The schema with each entry expanded to one unit per column, not yet bound
// to field indices (that may need a header).
struct Unit {
  const ColumnSpec* spec = nullptr;
  int index = -1;  // A fixed 0-based index, or -1: by name or the next column.
};

// The columns of one file, in the order of their output: labels, dense
// values and slots each in schema order.
struct Binding {
  int num_columns = 0;
  std::vector<BoundColumn> labels;
  std::vector<BoundColumn> dense;
  std::vector<BoundColumn> slots;
};

class DelimitedParser final : public LineParser {
 public:
  DelimitedParser(Binding binding, char delimiter, int slot_bits)
      : binding_(std::move(binding)), delimiter_(delimiter), slot_bits_(slot_bits) {}

  bool ParseLine(std::string_view line, Batch* out, LineError* error) const override {
    thread_local std::vector<std::string_view> fields;
    fields.resize(binding_.num_columns);
    const int columns = SplitFields(line, delimiter_, fields.data(), binding_.num_columns);
    if (columns != binding_.num_columns) {
      *error = LineError{BadLineReason::kColumnCount, StrCat(columns, " columns")};
      return false;
    }
    for (const BoundColumn& label : binding_.labels) {
      float value = 0.0f;
      if (!ParseLabel(label, fields[label.column], &value)) {
        *error = LineError{BadLineReason::kBadLabel,
                           StrCat(label.description, "=", Quote(fields[label.column]))};
        return false;
      }
      out->labels.push_back(value);
    }
    for (const BoundColumn& dense : binding_.dense) {
      const std::string_view field = fields[dense.column];
      double value = 0.0;
      if (!field.empty() && !ParseFiniteDouble(field, &value)) {
        *error = LineError{BadLineReason::kUnparsableNumber,
                           StrCat(dense.description, "=", Quote(field))};
        return false;
      }
      out->dense.push_back(field.empty() ? 0.0f : Transform(dense, value));
    }
    for (int s = 0; s < static_cast<int>(binding_.slots.size()); ++s) {
      const BoundColumn& slot = binding_.slots[s];
      const std::string_view field = fields[slot.column];
      if (slot.role == ColumnRole::kCategorical) {
        out->keys.push_back(HashCategorical(s, field, slot_bits_));
      } else {
        AppendBag(s, field, slot.inner_delimiter, out);
      }
      out->offsets.push_back(static_cast<int64_t>(out->keys.size()));
    }
    return true;
  }

 private:
  static bool ParseLabel(const BoundColumn& label, std::string_view field, float* value) {
    if (!label.threshold) return ParseUnitLabel(field, value);
    double number = 0.0;
    if (!ParseFiniteDouble(field, &number)) return false;
    *value = number >= *label.threshold ? 1.0f : 0.0f;
    return true;
  }

  static float Transform(const BoundColumn& dense, double value) {
    value = std::clamp(value, dense.min, dense.max);
    if (dense.transform == DenseTransform::kRaw) return static_cast<float>(value);
    // Counts are mostly small integers: look them up.
    if (value >= 0.0 && value < internal::kSmallCounts && value == static_cast<int64_t>(value)) {
      return internal::LogTransformCount(static_cast<int64_t>(value));
    }
    return LogTransform(value);
  }

  void AppendBag(int slot, std::string_view field, char inner_delimiter, Batch* out) const {
    size_t start = 0;
    while (start <= field.size()) {
      size_t end = field.find(inner_delimiter, start);
      if (end == std::string_view::npos) end = field.size();
      if (end > start) {
        out->keys.push_back(HashCategorical(slot, field.substr(start, end - start), slot_bits_));
      }
      start = end + 1;
    }
  }

  const Binding binding_;
  const char delimiter_;
  const int slot_bits_;
};

class DelimitedFormat final : public TextFormat {
 public:
  DelimitedFormat(DelimitedFormatOptions options, std::vector<Unit> units, TextLayout layout)
      : options_(std::move(options)), units_(std::move(units)), layout_(layout) {
    // Units point into the schema that this object now owns.
    size_t k = 0;
    for (const ColumnSpec& spec : options_.schema.columns) {
      const int count = spec.first_index >= 0 ? spec.last_index - spec.first_index + 1 : 1;
      for (int i = 0; i < count; ++i) units_[k++].spec = &spec;
    }
  }
  DelimitedFormat(const DelimitedFormat&) = delete;
  DelimitedFormat& operator=(const DelimitedFormat&) = delete;

  const char* name() const override { return "csv"; }
  TextLayout layout() const override { return layout_; }
  bool has_header() const override { return options_.header; }

  Result<std::unique_ptr<LineParser>> NewLineParser(std::string_view header) const override {
    EMBER_ASSIGN_OR_RETURN(Binding binding, Bind(header));
    return std::make_unique<DelimitedParser>(std::move(binding), options_.delimiter,
                                             options_.slot_bits);
  }

  // Binds the units to field indices (by the header's names if there is a
  // header). Errors do not name a file; the reader adds it.
  Result<Binding> Bind(std::string_view header) const {
    std::vector<std::string_view> names;
    std::map<std::string_view, int> by_name;
    std::set<std::string_view> repeated;
    if (options_.header) {
      names = SplitAll(header, options_.delimiter);
      for (int i = 0; i < static_cast<int>(names.size()); ++i) {
        if (!by_name.emplace(names[i], i).second) repeated.insert(names[i]);
      }
    }
    Binding binding;
    std::vector<const Unit*> bound_to;
    int next = 0;
    for (const Unit& unit : units_) {
      const ColumnSpec& spec = *unit.spec;
      int column = unit.index >= 0 ? unit.index : next;
      if (unit.index < 0 && options_.header && !spec.name.empty()) {
        const auto found = by_name.find(spec.name);
        if (found == by_name.end()) {
          return Status::InvalidArgument("schema column \"", spec.name, "\" is not in the header (",
                                         header.substr(0, 200), ")");
        }
        if (repeated.contains(spec.name)) {
          return Status::InvalidArgument("schema column \"", spec.name,
                                         "\" is in the header more than once");
        }
        column = found->second;
      }
      next = column + 1;
      if (column > kMaxColumnIndex) {
        return Status::InvalidArgument("column index out of range: ", column, " (at most ",
                                       kMaxColumnIndex, ")");
      }
      if (options_.header && column >= static_cast<int>(names.size())) {
        return Status::InvalidArgument("column index out of range: schema column ", column,
                                       " but the header has ", names.size(), " columns");
      }
      if (column >= static_cast<int>(bound_to.size())) bound_to.resize(column + 1, nullptr);
      if (bound_to[column] != nullptr) {
        return Status::InvalidArgument("column ", column, " is given two roles by the schema");
      }
      bound_to[column] = &unit;
      AddColumn(spec, column, &binding);
    }
    binding.num_columns =
        options_.header ? static_cast<int>(names.size()) : static_cast<int>(bound_to.size());
    return binding;
  }

 private:
  void AddColumn(const ColumnSpec& spec, int column, Binding* binding) const {
    BoundColumn bound;
    bound.column = column;
    bound.role = spec.role;
    bound.description =
        spec.name.empty() || spec.first_index >= 0 ? StrCat("column ", column) : StrCat(spec.name);
    bound.transform = spec.transform.value_or(options_.dense_defaults.transform);
    const std::optional<double> min = spec.min ? spec.min : options_.dense_defaults.min;
    const std::optional<double> max = spec.max ? spec.max : options_.dense_defaults.max;
    if (min) bound.min = *min;
    if (max) bound.max = *max;
    bound.threshold = spec.threshold;
    bound.inner_delimiter = spec.inner_delimiter;
    switch (spec.role) {
      case ColumnRole::kLabel:
        binding->labels.push_back(std::move(bound));
        break;
      case ColumnRole::kDense:
        binding->dense.push_back(std::move(bound));
        break;
      case ColumnRole::kCategorical:
      case ColumnRole::kMulti:
        binding->slots.push_back(std::move(bound));
        break;
      case ColumnRole::kIgnore:
        break;
    }
  }

  const DelimitedFormatOptions options_;
  std::vector<Unit> units_;
  const TextLayout layout_;
};

}  // namespace

Result<char> ParseDelimiter(std::string_view text) {
  static const std::pair<std::string_view, char> kNames[] = {
      {"comma", ','},     {"tab", '\t'},  {"space", ' '},
      {"semicolon", ';'}, {"colon", ':'}, {"pipe", '|'},
  };
  for (const auto& [name, c] : kNames) {
    if (text == name) return c;
  }
  if (text == "\\t") return '\t';
  if (text.size() != 1 || text[0] == '\n' || text[0] == '\r') {
    return Status::InvalidArgument("a delimiter is one byte or one of comma, tab, space, ",
                                   "semicolon, colon, pipe; got \"", text, "\"");
  }
  return text[0];
}

Result<DelimitedSchema> ParseSchemaSpec(std::string_view spec) {
  DelimitedSchema schema;
  int number = 0;
  for (const std::string_view raw : SplitAll(spec, ',')) {
    ++number;
    const std::string_view entry = Trim(raw);
    std::vector<std::string_view> parts = SplitAll(entry, ':');
    const std::string_view head = parts[0];
    const size_t equals = head.find('=');
    const std::string_view ref =
        equals == std::string_view::npos ? std::string_view() : head.substr(0, equals);
    const std::string_view role = equals == std::string_view::npos ? head : head.substr(equals + 1);
    const std::vector<std::string_view> options(parts.begin() + 1, parts.end());
    Result<ColumnSpec> column = ParseEntry(Trim(ref), Trim(role), options);
    if (!column.ok()) {
      return column.status().WithContext(StrCat("schema entry ", number, " (\"", entry, "\")"));
    }
    schema.columns.push_back(std::move(*column));
  }
  EMBER_RETURN_IF_ERROR(CheckSchema(schema));
  return schema;
}

Result<DelimitedSchema> ParseSchemaText(std::string_view text, std::string_view source) {
  DelimitedSchema schema;
  int line_number = 0;
  for (std::string_view line : SplitAll(text, '\n')) {
    ++line_number;
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> tokens;
    std::string_view token;
    while (internal::NextToken(&line, &token)) {
      // A file saved on Windows ends its lines in "\r".
      if (token.back() == '\r') token.remove_suffix(1);
      if (!token.empty()) tokens.push_back(token);
    }
    if (tokens.empty()) continue;
    const std::string where = StrCat(source, ":", line_number);
    if (tokens.size() < 2) {
      return Status::InvalidArgument(where, ": expected \"column role [option ...]\", got \"",
                                     tokens[0], "\"");
    }
    const std::vector<std::string_view> options(tokens.begin() + 2, tokens.end());
    Result<ColumnSpec> column = ParseEntry(tokens[0], tokens[1], options);
    if (!column.ok()) return column.status().WithContext(where);
    schema.columns.push_back(std::move(*column));
  }
  Status status = CheckSchema(schema);
  if (!status.ok()) return status.WithContext(std::string(source));
  return schema;
}

Result<DelimitedSchema> ReadSchemaFile(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseSchemaText(text, path);
}

Result<std::unique_ptr<TextFormat>> NewDelimitedFormat(const DelimitedFormatOptions& options) {
  if (options.slot_bits < 1 || options.slot_bits > 32) {
    return Status::InvalidArgument("slot_bits must be in [1, 32], got ", options.slot_bits);
  }
  if (options.delimiter == '\n' || options.delimiter == '\r') {
    return Status::InvalidArgument("the delimiter cannot be a line ending");
  }
  EMBER_RETURN_IF_ERROR(CheckSchema(options.schema));
  const DenseOptions& defaults = options.dense_defaults;
  if (defaults.min && defaults.max && *defaults.min > *defaults.max) {
    return Status::InvalidArgument("dense min ", *defaults.min, " is above max ", *defaults.max);
  }
  std::vector<Unit> units;
  TextLayout layout{.num_labels = 0, .num_dense = 0, .num_slots = 0};
  for (const ColumnSpec& spec : options.schema.columns) {
    if (spec.role == ColumnRole::kMulti && spec.inner_delimiter == options.delimiter) {
      return Status::InvalidArgument("multi column ",
                                     spec.name.empty() ? StrCat(spec.first_index) : spec.name,
                                     ": its inner delimiter is the field delimiter");
    }
    if (spec.first_index >= 0 && spec.last_index < spec.first_index) {
      return Status::InvalidArgument("empty column range ", spec.first_index, "-", spec.last_index);
    }
    const int count = spec.first_index >= 0 ? spec.last_index - spec.first_index + 1 : 1;
    for (int i = 0; i < count; ++i) {
      units.push_back(Unit{nullptr, spec.first_index >= 0 ? spec.first_index + i : -1});
    }
    switch (spec.role) {
      case ColumnRole::kLabel:
        layout.num_labels += count;
        break;
      case ColumnRole::kDense:
        layout.num_dense += count;
        break;
      case ColumnRole::kCategorical:
      case ColumnRole::kMulti:
        layout.num_slots += count;
        break;
      case ColumnRole::kIgnore:
        break;
    }
  }
  if (layout.num_slots > (int64_t{1} << options.slot_bits)) {
    return Status::InvalidArgument(layout.num_slots, " categorical columns need more than ",
                                   options.slot_bits, " slot bits");
  }
  auto format = std::make_unique<DelimitedFormat>(options, std::move(units), layout);
  // Without a header the binding is the same for every file: check it now.
  if (!options.header) EMBER_RETURN_IF_ERROR(format->Bind("").status());
  return std::unique_ptr<TextFormat>(std::move(format));
}

}  // namespace ember::io
