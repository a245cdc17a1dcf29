#include "io/slot_format.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "io/internal/text_parsing.h"

namespace ember::io {
namespace {

using ::ember::internal::StrCat;
using internal::NextToken;
using internal::Quote;
using internal::SlotKey;

// Names of this form up to this value are looked up in an array, not hashed.
constexpr uint64_t kMaxNumberedSlot = 65535;

// What a slot name stands for.
struct Target {
  enum Kind { kNone, kSparse, kDense, kLabel };
  Kind kind = kNone;
  int index = 0;  // Slot, dense slot or label index.
};

// The slot names of a format, shared by its parsers; immutable once built.
struct SlotTable {
  std::vector<std::string> names;  // Owns the strings the maps view.
  std::unordered_map<std::string_view, Target> by_name;
  // When every name is a decimal number without leading zeros (PaddleRec's
  // "1".."409"): by_number[n] is the target of name n.
  std::vector<Target> by_number;
  std::vector<int> dense_begin;  // First dense feature of each dense slot.
  std::vector<int> dense_width;
  std::vector<std::string> label_names;
  int num_slots = 0;
  int num_dense = 0;

  Target Find(std::string_view name) const {
    if (!by_number.empty()) {
      uint64_t number = 0;
      // A name with leading zeros is not any declared name.
      if (name.size() > 1 && name[0] == '0') return Target{};
      if (!internal::ParseUint64(name, &number) || number >= by_number.size()) return Target{};
      return by_number[number];
    }
    const auto found = by_name.find(name);
    return found == by_name.end() ? Target{} : found->second;
  }
};

bool IsCanonicalNumber(std::string_view name, uint64_t* number) {
  return internal::ParseUint64(name, number) && (name.size() == 1 || name[0] != '0');
}

class SlotParser final : public LineParser {
 public:
  SlotParser(std::shared_ptr<const SlotTable> table, const SlotFormatOptions& options)
      : table_(std::move(table)),
        feasign_first_(options.feasign_first),
        ignore_unknown_slots_(options.ignore_unknown_slots),
        slot_bits_(options.slot_bits) {}

  bool ParseLine(std::string_view line, Batch* out, LineError* error) const override {
    const SlotTable& table = *table_;
    const int num_labels =
        table.label_names.empty() ? 1 : static_cast<int>(table.label_names.size());
    thread_local std::vector<float> labels;
    thread_local std::vector<uint8_t> has_label;
    thread_local std::vector<int> dense_filled;
    thread_local std::vector<SlotKey> features;
    labels.assign(num_labels, 0.0f);
    has_label.assign(num_labels, 0);
    dense_filled.assign(table.dense_width.size(), 0);
    features.clear();
    std::string_view rest = line;
    std::string_view token;
    if (table.label_names.empty()) {
      const bool found = NextToken(&rest, &token);
      if (!found || !internal::ParseUnitLabel(token, &labels[0])) {
        *error = LineError{BadLineReason::kBadLabel, found ? Quote(token) : "no label"};
        return false;
      }
      has_label[0] = 1;
    }
    const size_t dense_begin = out->dense.size();
    out->dense.resize(dense_begin + table.num_dense, 0.0f);
    while (NextToken(&rest, &token)) {
      const size_t colon = feasign_first_ ? token.rfind(':') : token.find(':');
      if (colon == std::string_view::npos) return Fail(BadLineReason::kBadFeature, token, error);
      std::string_view name = token.substr(0, colon);
      std::string_view value = token.substr(colon + 1);
      if (feasign_first_) std::swap(name, value);
      const Target target = table.Find(name);
      switch (target.kind) {
        case Target::kNone:
          if (ignore_unknown_slots_) continue;
          return Fail(BadLineReason::kUnknownSlot, token, error);
        case Target::kLabel:
          if (has_label[target.index] || !internal::ParseUnitLabel(value, &labels[target.index])) {
            return Fail(BadLineReason::kBadLabel, token, error);
          }
          has_label[target.index] = 1;
          break;
        case Target::kDense: {
          int& filled = dense_filled[target.index];
          if (filled == table.dense_width[target.index]) {
            *error = LineError{
                BadLineReason::kBadFeature,
                StrCat(Quote(token), ", more than ", table.dense_width[target.index], " values")};
            return false;
          }
          double number = 0.0;
          if (!internal::ParseFiniteDouble(value, &number)) {
            return Fail(BadLineReason::kUnparsableNumber, token, error);
          }
          out->dense[dense_begin + table.dense_begin[target.index] + filled++] =
              static_cast<float>(number);
          break;
        }
        case Target::kSparse:
          if (value.empty()) return Fail(BadLineReason::kBadFeature, token, error);
          features.push_back(
              SlotKey{target.index, HashCategorical(target.index, value, slot_bits_)});
          break;
      }
    }
    for (int k = 0; k < num_labels; ++k) {
      if (!has_label[k]) {
        *error = LineError{BadLineReason::kBadLabel, StrCat("no ", table.label_names[k])};
        return false;
      }
    }
    out->labels.insert(out->labels.end(), labels.begin(), labels.end());
    internal::AppendBags(&features, table.num_slots, out);
    return true;
  }

 private:
  static bool Fail(BadLineReason reason, std::string_view token, LineError* error) {
    *error = LineError{reason, Quote(token)};
    return false;
  }

  const std::shared_ptr<const SlotTable> table_;
  const bool feasign_first_;
  const bool ignore_unknown_slots_;
  const int slot_bits_;
};

class SlotFormat final : public TextFormat {
 public:
  SlotFormat(std::shared_ptr<const SlotTable> table, const SlotFormatOptions& options)
      : table_(std::move(table)), options_(options) {}

  const char* name() const override { return "slot"; }
  TextLayout layout() const override {
    return TextLayout{.num_labels = table_->label_names.empty()
                                        ? 1
                                        : static_cast<int>(table_->label_names.size()),
                      .num_dense = table_->num_dense,
                      .num_slots = table_->num_slots};
  }
  bool has_header() const override { return false; }
  Result<std::unique_ptr<LineParser>> NewLineParser(std::string_view header) const override {
    return std::make_unique<SlotParser>(table_, options_);
  }

 private:
  const std::shared_ptr<const SlotTable> table_;
  const SlotFormatOptions options_;
};

Status CheckName(const std::string& name) {
  if (name.empty() || name.find_first_of(": \t") != std::string::npos) {
    return Status::InvalidArgument("slot name \"", name, "\" is empty or holds ':' or a blank");
  }
  return Status::OK();
}

// Builds the table; InvalidArgument for a bad or repeated name.
Result<std::shared_ptr<const SlotTable>> BuildTable(const SlotFormatOptions& options) {
  auto table = std::make_shared<SlotTable>();
  std::vector<std::pair<std::string, Target>> entries;
  for (int s = 0; s < static_cast<int>(options.slots.size()); ++s) {
    entries.push_back({options.slots[s], Target{Target::kSparse, s}});
  }
  for (int d = 0; d < static_cast<int>(options.dense_slots.size()); ++d) {
    const DenseSlot& dense = options.dense_slots[d];
    if (dense.width < 1) {
      return Status::InvalidArgument("dense slot \"", dense.name, "\" has width ", dense.width,
                                     "; it must be >= 1");
    }
    entries.push_back({dense.name, Target{Target::kDense, d}});
    table->dense_begin.push_back(table->num_dense);
    table->dense_width.push_back(dense.width);
    table->num_dense += dense.width;
  }
  for (int k = 0; k < static_cast<int>(options.label_slots.size()); ++k) {
    entries.push_back({options.label_slots[k], Target{Target::kLabel, k}});
  }
  table->num_slots = static_cast<int>(options.slots.size());
  table->label_names = options.label_slots;
  table->names.reserve(entries.size());
  bool numbered = true;
  uint64_t max_number = 0;
  for (const auto& [name, target] : entries) {
    EMBER_RETURN_IF_ERROR(CheckName(name));
    uint64_t number = 0;
    numbered = numbered && IsCanonicalNumber(name, &number) && number <= kMaxNumberedSlot;
    max_number = std::max(max_number, number);
    table->names.push_back(name);
  }
  // `names` no longer grows: views into it stay valid.
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!table->by_name.emplace(table->names[i], entries[i].second).second) {
      return Status::InvalidArgument("slot \"", table->names[i], "\" is declared twice");
    }
  }
  if (numbered) {
    table->by_number.resize(max_number + 1);
    for (size_t i = 0; i < entries.size(); ++i) {
      uint64_t number = 0;
      IsCanonicalNumber(table->names[i], &number);
      table->by_number[number] = entries[i].second;
    }
  }
  return std::shared_ptr<const SlotTable>(std::move(table));
}

std::vector<std::string_view> SplitCommas(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(',', start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

Result<std::unique_ptr<TextFormat>> NewSlotFormat(const SlotFormatOptions& options) {
  if (options.slot_bits < 1 || options.slot_bits > 32) {
    return Status::InvalidArgument("slot_bits must be in [1, 32], got ", options.slot_bits);
  }
  if (options.slots.empty() && options.dense_slots.empty()) {
    return Status::InvalidArgument("the slot format needs at least one sparse or dense slot");
  }
  if (options.slots.size() > (uint64_t{1} << options.slot_bits)) {
    return Status::InvalidArgument(options.slots.size(), " slots need more than ",
                                   options.slot_bits, " slot bits");
  }
  EMBER_ASSIGN_OR_RETURN(std::shared_ptr<const SlotTable> table, BuildTable(options));
  return std::make_unique<SlotFormat>(std::move(table), options);
}

Result<std::vector<std::string>> ParseSlotList(std::string_view text) {
  std::vector<std::string> names;
  if (text.empty()) return names;
  for (const std::string_view part : SplitCommas(text)) {
    const size_t dash = part.find('-');
    uint64_t first = 0;
    uint64_t last = 0;
    if (dash != std::string_view::npos && internal::ParseUint64(part.substr(0, dash), &first) &&
        internal::ParseUint64(part.substr(dash + 1), &last)) {
      if (first > last || last - first > kMaxNumberedSlot) {
        return Status::InvalidArgument("bad slot range \"", part, "\"");
      }
      for (uint64_t n = first; n <= last; ++n) names.push_back(std::to_string(n));
      continue;
    }
    if (part.empty()) return Status::InvalidArgument("empty slot name in \"", text, "\"");
    names.emplace_back(part);
  }
  return names;
}

Result<std::vector<DenseSlot>> ParseDenseSlotList(std::string_view text) {
  std::vector<DenseSlot> slots;
  if (text.empty()) return slots;
  for (const std::string_view part : SplitCommas(text)) {
    const size_t colon = part.find(':');
    DenseSlot slot{std::string(part.substr(0, colon)), 1};
    if (colon != std::string_view::npos) {
      int64_t width = 0;
      if (!internal::ParseInt64(part.substr(colon + 1), &width) || width < 1 || width > 65536) {
        return Status::InvalidArgument("bad dense slot \"", part, "\": expected name[:width]");
      }
      slot.width = static_cast<int>(width);
    }
    if (slot.name.empty())
      return Status::InvalidArgument("empty dense slot name in \"", text, "\"");
    slots.push_back(std::move(slot));
  }
  return slots;
}

}  // namespace ember::io
