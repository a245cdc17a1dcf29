#include "io/criteo.h"

#include <array>
#include <string_view>

#include "io/feature_hash.h"
#include "io/internal/text_parsing.h"

namespace ember::io {
namespace {

using ::ember::internal::StrCat;
using internal::LogTransformCount;
using internal::ParseInt64;
using internal::Quote;
using internal::SplitFields;

// Every Criteo file has the same columns, so one parser serves all files.
class CriteoParser final : public LineParser {
 public:
  explicit CriteoParser(int slot_bits) : slot_bits_(slot_bits) {}

  bool ParseLine(std::string_view line, Batch* out, LineError* error) const override {
    std::array<std::string_view, kCriteoColumns> fields;
    const int columns = SplitFields(line, '\t', fields.data(), kCriteoColumns);
    if (columns != kCriteoColumns) {
      *error = LineError{BadLineReason::kColumnCount, StrCat(columns, " columns")};
      return false;
    }
    if (fields[0] != "0" && fields[0] != "1") {
      *error = LineError{BadLineReason::kBadLabel, Quote(fields[0])};
      return false;
    }
    // Written in place; the caller removes a partial example.
    const size_t dense_begin = out->dense.size();
    out->dense.resize(dense_begin + kCriteoDense);
    float* dense = out->dense.data() + dense_begin;
    for (int j = 0; j < kCriteoDense; ++j) {
      const std::string_view field = fields[1 + j];
      int64_t value = 0;
      if (!field.empty() && !ParseInt64(field, &value)) {
        *error =
            LineError{BadLineReason::kUnparsableInteger, StrCat("I", j + 1, "=", Quote(field))};
        return false;
      }
      dense[j] = LogTransformCount(value);
    }
    out->labels.push_back(fields[0] == "1" ? 1.0f : 0.0f);
    const size_t key_begin = out->keys.size();
    const size_t offset_begin = out->offsets.size();
    out->keys.resize(key_begin + kCriteoSlots);
    out->offsets.resize(offset_begin + kCriteoSlots);
    Key* keys = out->keys.data() + key_begin;
    int64_t* offsets = out->offsets.data() + offset_begin;
    for (int s = 0; s < kCriteoSlots; ++s) {
      keys[s] = HashCategorical(s, fields[1 + kCriteoDense + s], slot_bits_);
      // One key per bag.
      offsets[s] = static_cast<int64_t>(key_begin) + s + 1;
    }
    return true;
  }

 private:
  const int slot_bits_;
};

class CriteoFormat final : public TextFormat {
 public:
  explicit CriteoFormat(int slot_bits) : slot_bits_(slot_bits) {}

  const char* name() const override { return "criteo"; }
  TextLayout layout() const override {
    return TextLayout{.num_labels = 1, .num_dense = kCriteoDense, .num_slots = kCriteoSlots};
  }
  bool has_header() const override { return false; }
  Result<std::unique_ptr<LineParser>> NewLineParser(std::string_view header) const override {
    return std::make_unique<CriteoParser>(slot_bits_);
  }

 private:
  const int slot_bits_;
};

}  // namespace

Result<std::unique_ptr<TextFormat>> NewCriteoFormat(int slot_bits) {
  if (slot_bits < 5 || slot_bits > 32) {
    // 26 slots need at least 5 slot bits.
    return Status::InvalidArgument("slot_bits must be in [5, 32] for Criteo, got ", slot_bits);
  }
  return std::make_unique<CriteoFormat>(slot_bits);
}

Result<Dataset> ReadCriteoFiles(const std::vector<std::string>& paths,
                                const CriteoReadOptions& options) {
  if (paths.empty()) return Status::InvalidArgument("no Criteo files to read");
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<TextFormat> format, NewCriteoFormat(options.slot_bits));
  TextReadOptions read;
  read.bad_lines = options.bad_lines;
  read.max_bad_ratio = options.max_bad_ratio;
  read.threads = options.threads;
  return ReadTextFiles(paths, *format, read);
}

}  // namespace ember::io
