#include "core/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ember {
namespace {

// Values nested deeper than this (the document itself is depth 0) are
// refused: every file Ember reads is a few levels deep, and a bound keeps
// a hostile file from exhausting the stack.
constexpr int kMaxDepth = 16;

JsonValue Convert(const Json& json) {
  JsonValue value;
  switch (json.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      break;
    case Json::value_t::boolean:
      value.type = JsonValue::Type::kBool;
      value.boolean = json.get<bool>();
      break;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      // Integers exactly; other numbers in the shortest form that reads
      // back to the same double.
      value.type = JsonValue::Type::kNumber;
      value.text = json.dump();
      break;
    case Json::value_t::string:
      value.type = JsonValue::Type::kString;
      value.text = json.get<std::string>();
      break;
    case Json::value_t::array:
      value.type = JsonValue::Type::kArray;
      value.items.reserve(json.size());
      for (const Json& item : json) value.items.push_back(Convert(item));
      break;
    case Json::value_t::object:
      value.type = JsonValue::Type::kObject;
      value.fields.reserve(json.size());
      for (const auto& [key, item] : json.items()) value.fields.emplace_back(key, Convert(item));
      break;
    case Json::value_t::binary:  // not produced by parsing text
      break;
  }
  return value;
}

std::string Detail(const std::exception& e) { return internal::JsonDetail(e); }

}  // namespace

namespace internal {
// An exception's message without its "[json.exception.<kind>.<id>] " prefix.
std::string JsonDetail(const std::exception& e) {
  const std::string what = e.what();
  if (what.rfind("[json.exception.", 0) != 0) return what;
  const size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}
}  // namespace internal

JsonFields::JsonFields(const Json& object) : object_(object) {
  if (!object_.is_object()) throw JsonFieldError("", "is not an object");
}

bool JsonFields::Has(const char* key) { return Raw(key) != nullptr; }

const Json* JsonFields::Raw(const char* key) {
  const auto it = object_.find(key);
  if (it == object_.end()) return nullptr;
  read_.insert(key);
  return &*it;
}

void JsonFields::Done() const {
  for (const auto& [key, value] : object_.items()) {
    if (read_.count(key) == 0) throw JsonFieldError(key, "is not a known field");
  }
}

Result<Json> ParseJsonText(const std::string& text) {
  bool too_deep = false;
  const Json::parser_callback_t bound_depth = [&](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxDepth) too_deep = true;
    return !too_deep;
  };
  try {
    Json json = Json::parse(text, bound_depth);
    if (too_deep) {
      return Status::InvalidArgument("malformed JSON: nested deeper than ", kMaxDepth, " levels");
    }
    return json;
  } catch (const Json::parse_error& e) {
    // e.byte counts from 1 (0 when nothing was read); the offset from 0.
    return Status::InvalidArgument("malformed JSON near byte ", e.byte > 0 ? e.byte - 1 : 0, ": ",
                                   Detail(e));
  } catch (const Json::exception& e) {  // e.g. a number out of a double's range
    return Status::InvalidArgument("malformed JSON: ", Detail(e));
  }
}

std::string JsonText(const Json& json, int indent) {
  return json.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

Result<Json> ParseJsonText(const std::string& text, const std::string& path) {
  Result<Json> json = ParseJsonText(text);
  if (json.ok()) return json;
  // ParseJsonText names the byte ("... near byte N: ..."); say line and column.
  const std::string message = json.status().message();
  constexpr std::string_view kNearByte = "near byte ";
  const size_t at = message.find(kNearByte);
  const size_t byte = at == std::string::npos
                          ? 0
                          : std::strtoull(message.c_str() + at + kNearByte.size(), nullptr, 10);
  int line = 1, column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return Status::InvalidArgument(path, ":", line, ":", column, ": malformed JSON (", message, ")");
}

JsonValue::JsonValue() = default;

const JsonValue* JsonValue::Find(const std::string& key) const {
  for (const auto& [name, value] : fields) {
    if (name == key) return &value;
  }
  return nullptr;
}

Result<JsonValue> ParseJson(const std::string& text) {
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseJsonText(text));
  return Convert(json);
}

std::string JsonQuote(const std::string& text) {
  // Bytes that are not UTF-8 become U+FFFD: the result is always valid JSON.
  return JsonText(Json(text));
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
