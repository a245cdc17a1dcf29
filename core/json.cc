#include "core/json.h"

#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ember {
namespace {

// Values nested deeper than this (the document itself is depth 0) are
// refused: every file Ember reads is a few levels deep, and a bound keeps
// a hostile file from exhausting the stack.
constexpr int kMaxDepth = 16;

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

}  // namespace ember
