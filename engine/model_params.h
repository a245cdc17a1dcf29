#pragma once

// A model's own hyper-parameters: each model of the zoo declares its
// parameters in its file (ModelSpec::params, engine/model_registry.h) beside
// the options every model has (engine/model_options.h), and the tools bind a
// flag to each (tools/model_flags.h), manifests write each as a field and
// help texts list them, all from the declarations. A model reads its values
// from ModelOptions::params, which the zoo fills with the declared defaults
// before the model is built (engine/model_zoo.h: ResolveModelOptions).

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/json_fwd.h"
#include "core/status.h"

namespace ember::engine {

// A value: an integer, a number, a word, or a list of layer widths.
using ModelParamValue = std::variant<int, double, std::string, std::vector<int>>;

enum class ModelParamKind { kInt, kDouble, kString, kWidths };

ModelParamKind KindOf(const ModelParamValue& value);
// "an integer", "a number", "a string", "a list of widths" (for messages).
const char* ModelParamKindName(ModelParamKind kind);

// One parameter a model declares.
struct ModelParamSpec {
  // Lowercase: its flag (--name) and its field in manifests. Unique within a
  // model; a model that shares a parameter with another (dlrm's and moe's
  // bottom_mlp) declares it of the same kind and default (they share a flag).
  std::string name;
  // The value when none is given; its alternative is the parameter's kind.
  ModelParamValue default_value;
  // One or two sentences for help texts, without the flag's name.
  std::string help;
  // InvalidArgument saying why a value of the kind cannot be used ("must be
  // >= 1"); the caller names the parameter. Null: any value of the kind.
  std::function<Status(const ModelParamValue&)> check;
};

// Checks for ModelParamSpec::check.
std::function<Status(const ModelParamValue&)> AtLeast(int min);
// A finite number in (low, high] (`low_open`) or [low, high].
std::function<Status(const ModelParamValue&)> InRange(double low, double high, bool low_open);
std::function<Status(const ModelParamValue&)> OneOf(std::vector<std::string> words);
// Positive widths, at least `min_count` of them.
std::function<Status(const ModelParamValue&)> Widths(size_t min_count);

// The values a model's parameters have, by name, in the order they were set
// (a resolved model's: its declaration order).
class ModelParams {
 public:
  // Replaces any value of `name`: Set("bottom_mlp", std::vector<int>{64, 16}).
  ModelParams& Set(const std::string& name, ModelParamValue value);
  // nullptr when `name` has no value.
  const ModelParamValue* Find(std::string_view name) const;
  // The value of `name`, which the model declares with that kind.
  // REQUIRES: resolved options (every declared parameter has its value); a
  // name the model does not declare is a programming error (CHECK).
  int Int(std::string_view name) const;
  double Double(std::string_view name) const;
  const std::string& String(std::string_view name) const;
  const std::vector<int>& WidthList(std::string_view name) const;

  const std::vector<std::pair<std::string, ModelParamValue>>& values() const { return values_; }
  bool empty() const { return values_.empty(); }

 private:
  std::vector<std::pair<std::string, ModelParamValue>> values_;
};

// "512,256,64": MLP widths as flags, descriptors and messages write them.
std::string JoinWidths(const std::vector<int>& widths);
// Comma-separated positive widths ("512,256,64"; "" is none); InvalidArgument
// "--<flag>=<text>: 'x' is not a positive integer".
Result<std::vector<int>> ParseWidths(const std::string& flag, const std::string& text);

// A value as its flag holds it: "4", "1.25", "bottom", "512,256,64".
std::string FormatModelParamValue(const ModelParamValue& value);
// The text of a flag of kind `kind`; InvalidArgument "--<name>=<text>: ...".
Result<ModelParamValue> ParseModelParamValue(const std::string& name, ModelParamKind kind,
                                             const std::string& text);
// The value of `spec` after its kind's conversions (an integer where a
// number is declared) and its check; InvalidArgument naming --<name> for a
// value of another kind or one that fails the check.
Result<ModelParamValue> CheckModelParam(const ModelParamSpec& spec, ModelParamValue value);

// A value as manifests write it (a number, a string, an array of widths),
// and read back as kind `kind`: throws JsonFieldError (core/json.h) for JSON
// of another kind.
Json ModelParamJson(const ModelParamValue& value);
ModelParamValue ModelParamFromJson(const Json& json, ModelParamKind kind);

}  // namespace ember::engine
