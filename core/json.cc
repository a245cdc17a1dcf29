#include "core/json.h"

#include <cmath>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace ember {
namespace {

// Recursive descent over RFC 8259 JSON; \u escapes outside ASCII are not
// needed by manifests and are rejected.
class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : text_(text) {}

  size_t position() const { return pos_; }

  bool ParseDocument(JsonValue* value) {
    if (!ParseValue(value, 0)) return false;
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) != nullptr) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(const char* word) {
    const size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }
  bool ParseValue(JsonValue* value, int depth) {
    if (depth > 16) return false;
    SkipSpace();
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{') return ParseObject(value, depth);
    if (c == '[') return ParseArray(value, depth);
    if (c == '"') {
      value->type = JsonValue::Type::kString;
      return ParseString(&value->text);
    }
    if (ConsumeWord("true") || ConsumeWord("false")) {
      value->type = JsonValue::Type::kBool;
      value->boolean = c == 't';
      return true;
    }
    if (ConsumeWord("null")) return true;
    const size_t start = pos_;
    while (pos_ < text_.size() && std::strchr("+-0123456789.eE", text_[pos_]) != nullptr) ++pos_;
    if (pos_ == start) return false;
    value->type = JsonValue::Type::kNumber;
    value->text = text_.substr(start, pos_ - start);
    return true;
  }
  bool ParseString(std::string* out) {
    if (!Consume('"')) return false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (pos_ >= text_.size()) return false;
      const char e = text_[pos_++];
      const char* from = "\"\\/bfnrt";
      const char* to = "\"\\/\b\f\n\r\t";
      const char* hit = std::strchr(from, e);
      if (hit != nullptr && e != '\0') {
        *out += to[hit - from];
      } else if (e == 'u' && pos_ + 4 <= text_.size()) {
        unsigned code = 0;
        auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, code, 16);
        if (ec != std::errc() || end != text_.data() + pos_ + 4 || code > 0x7f) return false;
        *out += static_cast<char>(code);
        pos_ += 4;
      } else {
        return false;
      }
    }
    return false;
  }
  bool ParseArray(JsonValue* value, int depth) {
    value->type = JsonValue::Type::kArray;
    Consume('[');
    if (Consume(']')) return true;
    do {
      value->items.emplace_back();
      if (!ParseValue(&value->items.back(), depth + 1)) return false;
    } while (Consume(','));
    return Consume(']');
  }
  bool ParseObject(JsonValue* value, int depth) {
    value->type = JsonValue::Type::kObject;
    Consume('{');
    if (Consume('}')) return true;
    do {
      std::string key;
      SkipSpace();
      if (!ParseString(&key) || !Consume(':')) return false;
      value->fields.emplace_back(std::move(key), JsonValue());
      if (!ParseValue(&value->fields.back().second, depth + 1)) return false;
    } while (Consume(','));
    return Consume('}');
  }

  const std::string& text_;
  size_t pos_ = 0;
};


}  // namespace

JsonValue::JsonValue() = default;

const JsonValue* JsonValue::Find(const std::string& key) const {
  for (const auto& [name, value] : fields) {
    if (name == key) return &value;
  }
  return nullptr;
}

Result<JsonValue> ParseJson(const std::string& text) {
  JsonValue value;
  JsonReader reader(text);
  if (!reader.ParseDocument(&value)) {
    return Status::InvalidArgument("malformed JSON near byte ", reader.position());
  }
  return value;
}

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

std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", value);
  return buf;
}

std::string JsonNumberArray(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += JsonNumber(values[i]);
  }
  return out + "]";
}

JsonObject& JsonObject::Add(const std::string& key, double value) {
  return AddRaw(key, JsonNumber(value));
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
