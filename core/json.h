#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_fwd.h"
#include "core/status.h"

namespace ember {

// ---- Options as JSON ------------------------------------------------------
//
// Every options struct that goes to a file (a bundle's manifest, a plan, a
// cluster file, a checkpoint's job record) serializes with nlohmann-json:
// `to_json` and `from_json` next to the struct, in the struct's own layer.
// Fields keep the order they are written in. A reader is strict: a field it
// does not know or a required field that is missing is an error naming the
// field by its path ("model.top_mlp"), and an integer must be an integer in
// its type's range.
//
//   void to_json(Json& j, const PlanKnobs& k) {
//     j = Json{{"batch_size", k.batch_size}, {"note", k.note}};
//   }
//   void from_json(const Json& j, PlanKnobs& k) {
//     JsonFields f(j);
//     f.Get("batch_size", &k.batch_size);
//     f.Optional("note", &k.note);  // absent (older files): keeps its value
//     f.Done();                     // a field nobody read is an error
//   }
//   EMBER_ASSIGN_OR_RETURN(Json j, ParseJsonText(text));
//   EMBER_ASSIGN_OR_RETURN(PlanKnobs k, FromJson<PlanKnobs>(j));
//
// from_json throws (nlohmann's convention); FromJson, the one way in, turns
// any error into a Status, so no exception leaves the caller. Headers that
// only declare to_json/from_json include core/json_fwd.h.

// An error inside a from_json: the path of the field and what is wrong.
class JsonFieldError : public std::runtime_error {
 public:
  JsonFieldError(std::string field, const std::string& problem)
      : std::runtime_error(problem), field_(std::move(field)) {}
  // The same error one object further out: `key` prefixes the path.
  JsonFieldError Within(const std::string& key) const {
    const char* dot = field_.empty() || field_[0] == '[' ? "" : ".";
    return JsonFieldError(field_.empty() ? key : key + dot + field_, what());
  }
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

namespace internal {
template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};
template <typename T>
struct IsStringMap : std::false_type {};
template <typename T, typename C, typename A>
struct IsStringMap<std::map<std::string, T, C, A>> : std::true_type {};
template <typename T>
struct IsKeyedVector : std::false_type {};
template <typename T, typename A>
struct IsKeyedVector<std::vector<std::pair<std::string, T>, A>> : std::true_type {};
// A nlohmann exception's message without its "[json.exception...] " prefix.
std::string JsonDetail(const std::exception& e);
// Reads `value` into `out`, strictly for integers (an integer value within
// T's range) and through from_json otherwise.
template <typename T>
void ReadJsonValue(const Json& value, T* out) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!value.is_number_integer()) throw JsonFieldError("", "is not an integer");
    if constexpr (std::is_unsigned_v<T>) {
      if (value.is_number_unsigned()) {
        const uint64_t v = value.get<uint64_t>();
        if (v > std::numeric_limits<T>::max()) throw JsonFieldError("", "is out of range");
        *out = static_cast<T>(v);
        return;
      }
      if (value.get<int64_t>() < 0) throw JsonFieldError("", "is negative");
      const uint64_t v = static_cast<uint64_t>(value.get<int64_t>());
      if (v > std::numeric_limits<T>::max()) throw JsonFieldError("", "is out of range");
      *out = static_cast<T>(v);
    } else {
      if (value.is_number_unsigned() &&
          value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw JsonFieldError("", "is out of range");
      }
      const int64_t v = value.get<int64_t>();
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
        throw JsonFieldError("", "is out of range");
      }
      *out = static_cast<T>(v);
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    // nlohmann writes NaN and the infinities as null: read back, NaN.
    if (value.is_null()) {
      *out = std::numeric_limits<T>::quiet_NaN();
      return;
    }
    if (!value.is_number()) throw JsonFieldError("", "is not a number");
    *out = value.get<T>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) throw JsonFieldError("", "is not true or false");
    *out = value.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) throw JsonFieldError("", "is not a string");
    *out = value.get<std::string>();
  } else {
    value.get_to(*out);
  }
}
}  // namespace internal

// std::vector fields: an array whose items read strictly (their paths are
// "field[3]").
template <typename T>
void ReadJsonArray(const Json& value, std::vector<T>* out) {
  if (!value.is_array()) throw JsonFieldError("", "is not an array");
  out->clear();
  out->reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    T item{};
    try {
      internal::ReadJsonValue(value[i], &item);
    } catch (const JsonFieldError& e) {
      throw JsonFieldError("[" + std::to_string(i) + "]" + (e.field().empty() ? "" : "." + e.field()),
                           e.what());
    } catch (const nlohmann::json::exception& e) {
      throw JsonFieldError("[" + std::to_string(i) + "]", "is invalid: " + internal::JsonDetail(e));
    }
    out->push_back(std::move(item));
  }
}

// std::vector<std::pair<std::string, T>> fields: an object, its fields in
// order as (key, value) pairs whose values read strictly (their paths are
// "field.key"). A writer builds the object itself: nlohmann writes such a
// vector as an array of pairs. std::map<std::string, T> fields read the
// same way (and nlohmann writes them as objects).
template <typename T>
void ReadJsonObject(const Json& value, std::vector<std::pair<std::string, T>>* out) {
  if (!value.is_object()) throw JsonFieldError("", "is not an object");
  out->clear();
  out->reserve(value.size());
  for (const auto& [key, item] : value.items()) {
    T read{};
    try {
      internal::ReadJsonValue(item, &read);
    } catch (const JsonFieldError& e) {
      throw e.Within(key);
    } catch (const nlohmann::json::exception& e) {
      throw JsonFieldError(key, "is invalid: " + internal::JsonDetail(e));
    }
    out->emplace_back(key, std::move(read));
  }
}

// Reads the fields of one JSON object inside a from_json (see above).
class JsonFields {
 public:
  // Throws JsonFieldError unless `object` is an object; borrows it.
  explicit JsonFields(const Json& object);

  // The required field `key`; missing or of the wrong type: an error.
  template <typename T>
  void Get(const char* key, T* out) {
    const auto it = object_.find(key);
    if (it == object_.end()) throw JsonFieldError(key, "is missing");
    Read(key, *it, out);
  }
  // The field `key` if present (a file written before the field existed);
  // absent, `out` keeps its value.
  template <typename T>
  void Optional(const char* key, T* out) {
    const auto it = object_.find(key);
    if (it != object_.end()) Read(key, *it, out);
  }
  // Whether the object has `key` (and marks it read).
  bool Has(const char* key);
  // The field `key` as raw JSON, or nullptr when absent (marks it read).
  const Json* Raw(const char* key);
  // Throws when the object has a field that none of the calls above read.
  void Done() const;

 private:
  template <typename T>
  void Read(const char* key, const Json& value, T* out) {
    read_.insert(key);
    try {
      if constexpr (internal::IsKeyedVector<T>::value) {
        ReadJsonObject(value, out);
      } else if constexpr (internal::IsStringMap<T>::value) {
        std::vector<std::pair<std::string, typename T::mapped_type>> pairs;
        ReadJsonObject(value, &pairs);
        out->clear();
        out->insert(pairs.begin(), pairs.end());
      } else if constexpr (internal::IsVector<T>::value) {
        ReadJsonArray(value, out);
      } else {
        internal::ReadJsonValue(value, out);
      }
    } catch (const JsonFieldError& e) {
      throw e.Within(key);
    } catch (const nlohmann::json::exception& e) {
      throw JsonFieldError(key, "is invalid: " + internal::JsonDetail(e));
    }
  }

  const Json& object_;
  std::set<std::string> read_;
};

// A struct whose fields are all required, listed once for both directions:
// `fields(object, field)` calls field("key", object.member) for each, in
// the order they are written.
//   constexpr auto kLinkNeedFields = [](auto& l, auto&& field) {
//     field("link", l.link);
//     field("gbps_needed", l.gbps_needed);
//   };
//   void to_json(Json& j, const LinkNeed& l) { WriteJsonFields(j, l, kLinkNeedFields); }
//   void from_json(const Json& j, LinkNeed& l) { ReadJsonFields(j, l, kLinkNeedFields); }
template <typename T, typename Fields>
void WriteJsonFields(Json& j, const T& object, Fields fields) {
  j = Json::object();
  fields(object, [&j](const char* key, const auto& value) { j[key] = value; });
}
template <typename T, typename Fields>
void ReadJsonFields(const Json& j, T& object, Fields fields) {
  JsonFields f(j);
  fields(object, [&f](const char* key, auto& value) { f.Get(key, &value); });
  f.Done();
}

// `text` parsed (RFC 8259; values nested up to 16 levels). InvalidArgument,
// with the byte offset, on anything else. Never throws.
Result<Json> ParseJsonText(const std::string& text);

// `json` as text, compact (indent < 0) or with `indent` spaces. Never
// throws: bytes that are not UTF-8 become U+FFFD.
std::string JsonText(const Json& json, int indent = -1);

// ParseJsonText for the contents of the file `path`: InvalidArgument
// "path:line:column: malformed JSON (...)" on anything else.
Result<Json> ParseJsonText(const std::string& text, const std::string& path);

// `json` read into a T by its from_json, starting from `value` (defaults).
// InvalidArgument "field \"a.b\": is missing" (the path, then the
// problem) on any error. Never throws.
template <typename T>
Result<T> FromJson(const Json& json, T value = T{}) {
  try {
    from_json(json, value);
  } catch (const JsonFieldError& e) {
    if (e.field().empty()) return Status::InvalidArgument("the document ", e.what());
    return Status::InvalidArgument("field \"", e.field(), "\" ", e.what());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(internal::JsonDetail(e));
  }
  return value;
}

// The file `path`, whose contents are `text`, read into a T: the errors of
// ParseJsonText(text, path) and of FromJson, the latter after "path: ".
template <typename T>
Result<T> FromJsonText(const std::string& text, const std::string& path, T value = T{}) {
  EMBER_ASSIGN_OR_RETURN(const Json json, ParseJsonText(text, path));
  Result<T> read = FromJson<T>(json, std::move(value));
  if (!read.ok()) return read.status().WithContext(path);
  return read;
}

}  // namespace ember
