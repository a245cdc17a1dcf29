#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ember {

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& text);

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
