#include "io/internal/text_parsing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/status.h"
#include "io/feature_hash.h"

namespace ember::io::internal {

std::string Quote(std::string_view field) {
  const bool cut = field.size() > kMaxQuotedBytes;
  if (cut) field = field.substr(0, kMaxQuotedBytes);
  std::string quoted = "\"";
  for (const char c : field) {
    const auto byte = static_cast<unsigned char>(c);
    // A control byte (a NUL, an escape sequence) would reach the terminal
    // or log as it is.
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  quoted += cut ? "...\"" : "\"";
  return quoted;
}

bool ParseFiniteDouble(std::string_view text, double* value) {
  // from_chars takes no leading '+'; "+-1" must stay an error.
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, *value);
  return error == std::errc() && ptr == end && std::isfinite(*value);
}

bool ParseUnitLabel(std::string_view text, float* label) {
  // The common labels first, without parsing a number.
  if (text.size() == 1 && (text[0] == '0' || text[0] == '1')) {
    *label = text[0] == '1' ? 1.0f : 0.0f;
    return true;
  }
  double value = 0.0;
  if (!ParseFiniteDouble(text, &value) || value < 0.0 || value > 1.0) return false;
  *label = static_cast<float>(value);
  return true;
}

bool ParseSignedLabel(std::string_view text, float* label) {
  if (text == "1" || text == "+1") {
    *label = 1.0f;
    return true;
  }
  if (text == "0" || text == "-1") {
    *label = 0.0f;
    return true;
  }
  double value = 0.0;
  if (!ParseFiniteDouble(text, &value)) return false;
  if (value != 1.0 && value != 0.0 && value != -1.0) return false;
  *label = value == 1.0 ? 1.0f : 0.0f;
  return true;
}

void AppendBags(std::vector<SlotKey>* features, int num_slots, Batch* out) {
  auto by_slot = [](const SlotKey& a, const SlotKey& b) { return a.slot < b.slot; };
  // Most lines list their features slot by slot already.
  if (!std::is_sorted(features->begin(), features->end(), by_slot)) {
    std::stable_sort(features->begin(), features->end(), by_slot);
  }
  size_t k = 0;
  for (int s = 0; s < num_slots; ++s) {
    while (k < features->size() && (*features)[k].slot == s)
      out->keys.push_back((*features)[k++].key);
    out->offsets.push_back(static_cast<int64_t>(out->keys.size()));
  }
}

const std::array<float, kSmallCounts>& BuildSmallCountLogs() {
  static const std::array<float, kSmallCounts> logs = [] {
    std::array<float, kSmallCounts> table;
    for (int64_t x = 0; x < kSmallCounts; ++x) table[x] = LogTransform(static_cast<double>(x));
    return table;
  }();
  return logs;
}

float LogTransformLarge(int64_t x) { return LogTransform(static_cast<double>(x)); }

}  // namespace ember::io::internal
