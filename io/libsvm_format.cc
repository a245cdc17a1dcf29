#include "io/libsvm_format.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "io/internal/text_parsing.h"

namespace ember::io {
namespace {

using ::ember::internal::StrCat;
using internal::CanonicalDigits;
using internal::NextToken;
using internal::Quote;
using internal::SlotKey;

Status CheckSlotBits(int slot_bits) {
  if (slot_bits < 1 || slot_bits > 32) {
    return Status::InvalidArgument("slot_bits must be in [1, 32], got ", slot_bits);
  }
  return Status::OK();
}

// What the two formats share: the label, the value of a feature and the
// bags. Subclasses find a token's slot and index.
class SparseParser : public LineParser {
 public:
  SparseParser(int num_slots, bool require_binary_values, int slot_bits)
      : num_slots_(num_slots),
        require_binary_values_(require_binary_values),
        slot_bits_(slot_bits) {}

  bool ParseLine(std::string_view line, Batch* out, LineError* error) const override {
    std::string_view rest = line;
    std::string_view token;
    float label = 0.0f;
    const bool has_label = NextToken(&rest, &token) && token[0] != '#';
    if (!has_label || !internal::ParseSignedLabel(token, &label)) {
      *error = LineError{BadLineReason::kBadLabel, has_label ? Quote(token) : "no label"};
      return false;
    }
    thread_local std::vector<SlotKey> features;
    features.clear();
    while (NextToken(&rest, &token)) {
      if (token[0] == '#') break;
      int slot = 0;
      std::string_view index;
      std::string_view value;
      if (!Split(token, &slot, &index, &value, error)) return false;
      // Binary data writes "1" for every value: skip the number parse.
      if (value != "1") {
        double number = 0.0;
        if (!internal::ParseFiniteDouble(value, &number)) {
          *error = LineError{BadLineReason::kUnparsableNumber, Quote(token)};
          return false;
        }
        if (number == 0.0) continue;
        if (require_binary_values_ && number != 1.0) {
          *error = LineError{BadLineReason::kBadFeature, StrCat(Quote(token), ", not binary")};
          return false;
        }
      }
      features.push_back(SlotKey{slot, HashCategorical(slot, CanonicalDigits(index), slot_bits_)});
    }
    out->labels.push_back(label);
    internal::AppendBags(&features, num_slots_, out);
    return true;
  }

 protected:
  // Splits a feature token into its slot, index digits and value, or fills
  // *error.
  virtual bool Split(std::string_view token, int* slot, std::string_view* index,
                     std::string_view* value, LineError* error) const = 0;

  static bool BadFeature(std::string_view token, LineError* error) {
    *error = LineError{BadLineReason::kBadFeature, Quote(token)};
    return false;
  }

 private:
  const int num_slots_;
  const bool require_binary_values_;
  const int slot_bits_;
};

class LibSvmParser final : public SparseParser {
 public:
  LibSvmParser(std::vector<uint64_t> field_starts, bool require_binary_values, int slot_bits)
      : SparseParser(field_starts.empty() ? 1 : static_cast<int>(field_starts.size()),
                     require_binary_values, slot_bits),
        field_starts_(std::move(field_starts)) {}

 private:
  bool Split(std::string_view token, int* slot, std::string_view* index, std::string_view* value,
             LineError* error) const override {
    const size_t colon = token.find(':');
    if (colon == std::string_view::npos || token.find(':', colon + 1) != std::string_view::npos) {
      return BadFeature(token, error);
    }
    *index = token.substr(0, colon);
    *value = token.substr(colon + 1);
    uint64_t index_value = 0;
    if (!internal::ParseUint64(*index, &index_value)) return BadFeature(token, error);
    if (field_starts_.empty()) {
      *slot = 0;
      return true;
    }
    const auto after = std::upper_bound(field_starts_.begin(), field_starts_.end(), index_value);
    if (after == field_starts_.begin()) {
      *error =
          LineError{BadLineReason::kUnknownSlot,
                    StrCat(Quote(token), ", below the first field start ", field_starts_.front())};
      return false;
    }
    *slot = static_cast<int>(after - field_starts_.begin()) - 1;
    return true;
  }

  const std::vector<uint64_t> field_starts_;
};

class LibFfmParser final : public SparseParser {
 public:
  LibFfmParser(int num_fields, bool require_binary_values, int slot_bits)
      : SparseParser(num_fields, require_binary_values, slot_bits), num_fields_(num_fields) {}

 private:
  bool Split(std::string_view token, int* slot, std::string_view* index, std::string_view* value,
             LineError* error) const override {
    const size_t first = token.find(':');
    const size_t second = first == std::string_view::npos ? first : token.find(':', first + 1);
    if (second == std::string_view::npos || token.find(':', second + 1) != std::string_view::npos) {
      return BadFeature(token, error);
    }
    const std::string_view field = token.substr(0, first);
    *index = token.substr(first + 1, second - first - 1);
    *value = token.substr(second + 1);
    uint64_t field_value = 0;
    uint64_t index_value = 0;
    if (!internal::ParseUint64(field, &field_value) ||
        !internal::ParseUint64(*index, &index_value)) {
      return BadFeature(token, error);
    }
    if (field_value >= static_cast<uint64_t>(num_fields_)) {
      *error = LineError{BadLineReason::kUnknownSlot,
                         StrCat(Quote(token), ", field >= num_fields ", num_fields_)};
      return false;
    }
    *slot = static_cast<int>(field_value);
    return true;
  }

  const int num_fields_;
};

class LibSvmFormat final : public TextFormat {
 public:
  explicit LibSvmFormat(const LibSvmFormatOptions& options) : options_(options) {}

  const char* name() const override { return "libsvm"; }
  TextLayout layout() const override {
    const int slots =
        options_.field_starts.empty() ? 1 : static_cast<int>(options_.field_starts.size());
    return TextLayout{.num_labels = 1, .num_dense = 0, .num_slots = slots};
  }
  bool has_header() const override { return false; }
  Result<std::unique_ptr<LineParser>> NewLineParser(std::string_view header) const override {
    return std::make_unique<LibSvmParser>(options_.field_starts, options_.require_binary_values,
                                          options_.slot_bits);
  }

 private:
  const LibSvmFormatOptions options_;
};

class LibFfmFormat final : public TextFormat {
 public:
  explicit LibFfmFormat(const LibFfmFormatOptions& options) : options_(options) {}

  const char* name() const override { return "libffm"; }
  TextLayout layout() const override {
    return TextLayout{.num_labels = 1, .num_dense = 0, .num_slots = options_.num_fields};
  }
  bool has_header() const override { return false; }
  Result<std::unique_ptr<LineParser>> NewLineParser(std::string_view header) const override {
    return std::make_unique<LibFfmParser>(options_.num_fields, options_.require_binary_values,
                                          options_.slot_bits);
  }

 private:
  const LibFfmFormatOptions options_;
};

}  // namespace

Result<std::unique_ptr<TextFormat>> NewLibSvmFormat(const LibSvmFormatOptions& options) {
  EMBER_RETURN_IF_ERROR(CheckSlotBits(options.slot_bits));
  const std::vector<uint64_t>& starts = options.field_starts;
  for (size_t f = 1; f < starts.size(); ++f) {
    if (starts[f] <= starts[f - 1]) {
      return Status::InvalidArgument("field_starts must increase: field ", f, " starts at ",
                                     starts[f], " after ", starts[f - 1]);
    }
  }
  if (starts.size() > (uint64_t{1} << options.slot_bits)) {
    return Status::InvalidArgument(starts.size(), " fields need more than ", options.slot_bits,
                                   " slot bits");
  }
  return std::make_unique<LibSvmFormat>(options);
}

Result<std::unique_ptr<TextFormat>> NewLibFfmFormat(const LibFfmFormatOptions& options) {
  EMBER_RETURN_IF_ERROR(CheckSlotBits(options.slot_bits));
  if (options.num_fields < 1) {
    return Status::InvalidArgument("libffm needs num_fields >= 1, got ", options.num_fields);
  }
  if (options.num_fields > (int64_t{1} << options.slot_bits)) {
    return Status::InvalidArgument(options.num_fields, " fields need more than ", options.slot_bits,
                                   " slot bits");
  }
  return std::make_unique<LibFfmFormat>(options);
}

}  // namespace ember::io
