#pragma once

// The text-format registry: what the readers, the serving input and the
// tools know about each text format, by name. A format is its parser (e.g.
// io/libsvm_format.{h,cc}) and one file of io/formats/ that returns its
// TextFormatEntry: the FormatSpec options it reads, its factory from a
// FormatSpec, how its unlabelled lines look, and an example for the
// contract tests (tests/io/text_format_contract_test.cc). It is added by one
// line of io/formats/builtin.cc; its flags are rows of tools/format_flags.cc.
// Registration is explicit, never by static initialisers (which linkers
// drop from static libraries).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "io/format_spec.h"
#include "io/text_format.h"

namespace ember::io {

// One text format.
struct TextFormatEntry {
  // What --format= selects and FormatSpec::name holds: lowercase, "csv".
  std::string name;
  // The FormatOptions (io/format_spec.h) the format reads, by name; another
  // option set in a spec of this format is InvalidArgument "X does not
  // apply to the N format" before `make` runs.
  std::vector<std::string> options;
  // Builds the format from `spec` (its name is this entry's, no other
  // format's option set): InvalidArgument for options it cannot use (a
  // missing schema, a bad list, ...). Required.
  std::function<Result<std::unique_ptr<TextFormat>>(const FormatSpec&)> make;
  // For lines without their labels (engine/serving_input.h): when lines of
  // `spec` begin with their label columns, the separator after each of them
  // ("\t" for criteo); empty when the labels lie elsewhere (csv: wherever its
  // schema puts them), and unlabelled lines are not read. Null: never.
  std::function<std::string(const FormatSpec&)> label_separator;
  // A spec of this format and text in it (a file's contents,
  // header included) of `example_rows` examples: the contract tests read
  // them. Required: a format without an example is not tested.
  FormatSpec example_spec;
  std::string example_text;
  int64_t example_rows = 0;
};

// Thread safety: every method may be called concurrently; an entry, once
// registered, stays at its address for the registry's lifetime. Register
// the formats before anything looks them up.
class TextFormatRegistry {
 public:
  TextFormatRegistry() = default;
  TextFormatRegistry(const TextFormatRegistry&) = delete;
  TextFormatRegistry& operator=(const TextFormatRegistry&) = delete;

  // InvalidArgument for an entry without a name, a factory or an example,
  // or naming an option FormatOptions() lacks; AlreadyExists "text format X
  // is already registered" for a second entry of one name.
  Status Register(TextFormatEntry entry);
  // The entry of `name`; InvalidArgument "unknown text format \"X\"
  // (expected a, b or c)" (registration order) when there is none.
  Result<const TextFormatEntry*> Find(const std::string& name) const;
  // The registered names, in registration order.
  std::vector<std::string> Names() const;
  // The entries, in registration order.
  std::vector<const TextFormatEntry*> Entries() const;

 private:
  mutable Mutex mu_;
  std::vector<std::unique_ptr<const TextFormatEntry>> entries_ GUARDED_BY(mu_);
};

// The registry of this process: the built-in formats (RegisterBuiltinTextFormats,
// io/formats/builtin.h), registered on first use, then any added with
// RegisterTextFormat. MakeTextFormat looks formats up here.
const TextFormatRegistry& DefaultTextFormatRegistry();

// Adds a format to DefaultTextFormatRegistry(), e.g. from a program's main
// before it parses its flags; the errors of TextFormatRegistry::Register.
Status RegisterTextFormat(TextFormatEntry entry);

// "a, b, c or d": the registered names as messages list them.
std::string TextFormatNameList();

// The keys (flag names, io/format_spec.h) of every option some registered
// format reads, in FormatOptions() order, each once.
std::vector<std::string> TextFormatOptionKeys();

}  // namespace ember::io
