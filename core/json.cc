#include "core/json.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace ember {

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

JsonObject& JsonObject::Add(const std::string& key, double value) {
  if (!std::isfinite(value)) return AddRaw(key, "null");
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", value);
  return AddRaw(key, buf);
}

JsonObject& JsonObject::Add(const std::string& key, int64_t value) {
  return AddRaw(key, std::to_string(value));
}

JsonObject& JsonObject::Add(const std::string& key, bool value) {
  return AddRaw(key, value ? "true" : "false");
}

JsonObject& JsonObject::Add(const std::string& key, const std::string& value) {
  return AddRaw(key, JsonQuote(value));
}

JsonObject& JsonObject::Add(const std::string& key, const JsonObject& value) {
  fields_.push_back(Field{key, "", {value}});
  return *this;
}

JsonObject& JsonObject::AddRaw(const std::string& key, std::string json) {
  fields_.push_back(Field{key, std::move(json), {}});
  return *this;
}

std::string JsonObject::ToString(int indent) const { return Render(indent, 0) + "\n"; }

std::string JsonObject::Render(int indent, int depth) const {
  if (fields_.empty()) return "{}";
  const bool pretty = indent >= 0;
  const std::string pad = pretty ? std::string((depth + 1) * indent, ' ') : "";
  const std::string close_pad = pretty ? std::string(depth * indent, ' ') : "";
  std::ostringstream out;
  out << "{" << (pretty ? "\n" : "");
  for (size_t i = 0; i < fields_.size(); ++i) {
    const Field& field = fields_[i];
    out << pad << JsonQuote(field.key) << (pretty ? ": " : ":");
    out << (field.object.empty() ? field.json : field.object[0].Render(indent, depth + 1));
    out << (i + 1 < fields_.size() ? "," : "") << (pretty ? "\n" : "");
  }
  out << close_pad << "}";
  return out.str();
}

}  // namespace ember
