#include "engine/model_params.h"

#include <glog/logging.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "core/json.h"

namespace ember::engine {
namespace {

template <typename T>
const T& Typed(const std::vector<std::pair<std::string, ModelParamValue>>& values,
               std::string_view name) {
  for (const auto& [key, value] : values) {
    if (key != name) continue;
    const T* typed = std::get_if<T>(&value);
    CHECK(typed != nullptr) << "model parameter " << name << " is "
                            << ModelParamKindName(KindOf(value));
    return *typed;
  }
  LOG(FATAL) << "model parameter " << name << " has no value (options not resolved?)";
}

}  // namespace

ModelParamKind KindOf(const ModelParamValue& value) {
  return static_cast<ModelParamKind>(value.index());
}

const char* ModelParamKindName(ModelParamKind kind) {
  switch (kind) {
    case ModelParamKind::kInt:
      return "an integer";
    case ModelParamKind::kDouble:
      return "a number";
    case ModelParamKind::kString:
      return "a string";
    case ModelParamKind::kWidths:
      return "a list of widths";
  }
  return "?";
}

std::function<Status(const ModelParamValue&)> AtLeast(int min) {
  return [min](const ModelParamValue& value) {
    const int* v = std::get_if<int>(&value);
    if (v != nullptr && *v < min) return Status::InvalidArgument("must be >= ", min);
    return Status::OK();
  };
}

std::function<Status(const ModelParamValue&)> InRange(double low, double high, bool low_open) {
  return [=](const ModelParamValue& value) {
    const double* v = std::get_if<double>(&value);
    if (v == nullptr) return Status::OK();
    if (!std::isfinite(*v) || *v > high || (low_open ? *v <= low : *v < low)) {
      if (high == std::numeric_limits<double>::max()) {
        return Status::InvalidArgument("must be finite and ", low_open ? "> " : ">= ", low);
      }
      return Status::InvalidArgument("must be ", low_open ? "> " : ">= ", low, " and at most ",
                                     high);
    }
    return Status::OK();
  };
}

std::function<Status(const ModelParamValue&)> OneOf(std::vector<std::string> words) {
  return [words = std::move(words)](const ModelParamValue& value) {
    const std::string* v = std::get_if<std::string>(&value);
    if (v == nullptr) return Status::OK();
    std::string expected;
    for (const std::string& word : words) {
      if (word == *v) return Status::OK();
      expected += (expected.empty() ? "" : " or ") + word;
    }
    return Status::InvalidArgument("must be ", expected);
  };
}

std::function<Status(const ModelParamValue&)> Widths(size_t min_count) {
  return [min_count](const ModelParamValue& value) {
    const std::vector<int>* v = std::get_if<std::vector<int>>(&value);
    if (v == nullptr) return Status::OK();
    for (int w : *v) {
      if (w < 1) return Status::InvalidArgument("widths must be positive, got ", w);
    }
    if (v->size() < min_count) return Status::InvalidArgument("needs a width");
    return Status::OK();
  };
}

ModelParams& ModelParams::Set(const std::string& name, ModelParamValue value) {
  for (auto& [key, old] : values_) {
    if (key == name) {
      old = std::move(value);
      return *this;
    }
  }
  values_.emplace_back(name, std::move(value));
  return *this;
}

const ModelParamValue* ModelParams::Find(std::string_view name) const {
  for (const auto& [key, value] : values_) {
    if (key == name) return &value;
  }
  return nullptr;
}

int ModelParams::Int(std::string_view name) const { return Typed<int>(values_, name); }
double ModelParams::Double(std::string_view name) const { return Typed<double>(values_, name); }
const std::string& ModelParams::String(std::string_view name) const {
  return Typed<std::string>(values_, name);
}
const std::vector<int>& ModelParams::WidthList(std::string_view name) const {
  return Typed<std::vector<int>>(values_, name);
}

std::string JoinWidths(const std::vector<int>& widths) {
  std::string out;
  for (int w : widths) {
    if (!out.empty()) out += ',';
    out += std::to_string(w);
  }
  return out;
}

Result<std::vector<int>> ParseWidths(const std::string& flag, const std::string& text) {
  std::vector<int> widths;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) {
      const std::string_view item(text.data() + start, end - start);
      int value = 0;
      const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
      if (ec != std::errc() || ptr != item.data() + item.size() || value < 1) {
        return Status::InvalidArgument("--", flag, "=", text, ": '", item,
                                       "' is not a positive integer");
      }
      widths.push_back(value);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return widths;
}

std::string FormatModelParamValue(const ModelParamValue& value) {
  switch (KindOf(value)) {
    case ModelParamKind::kInt:
      return std::to_string(std::get<int>(value));
    case ModelParamKind::kDouble: {
      char text[32];
      const auto [end, ec] = std::to_chars(text, text + sizeof(text), std::get<double>(value));
      return ec == std::errc() ? std::string(text, end) : "?";
    }
    case ModelParamKind::kString:
      return std::get<std::string>(value);
    case ModelParamKind::kWidths:
      return JoinWidths(std::get<std::vector<int>>(value));
  }
  return "?";
}

Result<ModelParamValue> ParseModelParamValue(const std::string& name, ModelParamKind kind,
                                             const std::string& text) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  switch (kind) {
    case ModelParamKind::kInt: {
      int value = 0;
      const auto [ptr, ec] = std::from_chars(begin, end, value);
      if (text.empty() || ec != std::errc() || ptr != end) {
        return Status::InvalidArgument("--", name, "=", text, ": expected an integer");
      }
      return ModelParamValue(value);
    }
    case ModelParamKind::kDouble: {
      double value = 0;
      const auto [ptr, ec] = std::from_chars(begin, end, value);
      if (text.empty() || ec != std::errc() || ptr != end) {
        return Status::InvalidArgument("--", name, "=", text, ": expected a number");
      }
      return ModelParamValue(value);
    }
    case ModelParamKind::kString:
      return ModelParamValue(text);
    case ModelParamKind::kWidths: {
      EMBER_ASSIGN_OR_RETURN(std::vector<int> widths, ParseWidths(name, text));
      return ModelParamValue(std::move(widths));
    }
  }
  return Status::Internal("model parameter ", name, " has an unknown kind");
}

Result<ModelParamValue> CheckModelParam(const ModelParamSpec& spec, ModelParamValue value) {
  const ModelParamKind kind = KindOf(spec.default_value);
  if (kind == ModelParamKind::kDouble && KindOf(value) == ModelParamKind::kInt) {
    value = static_cast<double>(std::get<int>(value));
  }
  if (KindOf(value) != kind) {
    return Status::InvalidArgument("--", spec.name, " takes ", ModelParamKindName(kind), ", got ",
                                   ModelParamKindName(KindOf(value)));
  }
  if (spec.check) {
    const Status status = spec.check(value);
    if (!status.ok()) {
      return Status::InvalidArgument("--", spec.name, "=", FormatModelParamValue(value), ": ",
                                     status.message());
    }
  }
  return value;
}

Json ModelParamJson(const ModelParamValue& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

ModelParamValue ModelParamFromJson(const Json& json, ModelParamKind kind) {
  switch (kind) {
    case ModelParamKind::kInt: {
      int value = 0;
      internal::ReadJsonValue(json, &value);
      return value;
    }
    case ModelParamKind::kDouble: {
      double value = 0;
      internal::ReadJsonValue(json, &value);
      return value;
    }
    case ModelParamKind::kString: {
      std::string value;
      internal::ReadJsonValue(json, &value);
      return value;
    }
    case ModelParamKind::kWidths: {
      std::vector<int> value;
      ReadJsonArray(json, &value);
      return value;
    }
  }
  throw JsonFieldError("", "has an unknown kind");
}

}  // namespace ember::engine
