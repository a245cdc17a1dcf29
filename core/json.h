#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ember {

// A parsed JSON document: one node per value.
struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  // Defaulted in json.cc: clang 14 with libstdc++ 12 checks an implicit
  // (constexpr) default constructor while the class is still incomplete,
  // which `fields`, holding the class itself, does not allow.
  JsonValue();
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;  // kString: the string; kNumber: the number (see ParseJson).
  std::vector<JsonValue> items;                             // kArray
  std::vector<std::pair<std::string, JsonValue>> fields;   // kObject, in order

  // The field named `key` of an object, or nullptr.
  const JsonValue* Find(const std::string& key) const;
};

// Parses a whole JSON document (RFC 8259, with nlohmann-json; values nested
// up to 16 levels). InvalidArgument, with the byte offset, on anything else.
// A number's `text` is its value written back: integers exactly, others in
// the shortest form that reads back to the same double.
Result<JsonValue> ParseJson(const std::string& text);

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& text);

// `value` as a JSON number ("%.10g"); null when not finite.
std::string JsonNumber(double value);
// `values` as a JSON array of numbers.
std::string JsonNumberArray(const std::vector<double>& values);

// Builds a JSON object field by field, preserving insertion order.
//   JsonObject o; o.Add("auc", 0.75).Add("model", "dlrm"); o.ToString();
class JsonObject {
 public:
  JsonObject& Add(const std::string& key, double value);
  JsonObject& Add(const std::string& key, int64_t value);
  JsonObject& Add(const std::string& key, int value) { return Add(key, int64_t{value}); }
  JsonObject& Add(const std::string& key, bool value);
  JsonObject& Add(const std::string& key, const std::string& value);
  JsonObject& Add(const std::string& key, const char* value) {
    return Add(key, std::string(value));
  }
  JsonObject& Add(const std::string& key, const JsonObject& value);
  JsonObject& AddRaw(const std::string& key, std::string json);
  // Pretty-printed with two-space indentation when `indent` >= 0.
  std::string ToString(int indent = 2) const;

 private:
  std::string Render(int indent, int depth) const;
  struct Field {
    std::string key;
    std::string json;            // Used when `object` is empty.
    std::vector<JsonObject> object;  // Holds at most one nested object.
  };
  std::vector<Field> fields_;
};

}  // namespace ember
