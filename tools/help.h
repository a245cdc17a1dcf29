#pragma once

// What `ember help`, `ember help CMD`, `ember CMD --help` and `ember
// --version` print: the commands, and for each command only the flags it
// reads, grouped by topic, with their defaults as a user would type them.

#include <string>
#include <vector>

#include "core/status.h"

namespace ember::tools {

// The commands of `ember`, in the order `ember help` lists them.
std::vector<std::string> CommandNames();

// Whether `name` is one of CommandNames().
bool IsCommand(const std::string& name);

// `ember help`: usage, the commands with a line or two each, exit statuses.
std::string UsageText();

// `ember --version`: "ember 0.1.0 (git 1a2b3c4)" (the commit when the build
// was configured in a git checkout).
std::string VersionText();

// `ember help CMD`: the command's summary and usage, then the flags it reads
// (its own and the shared ones), one per line, grouped by topic (data, model,
// optimizers, embedding tables, pipeline, checkpoints, output, planning,
// logging), each with its help wrapped and its default. NotFound for a name
// that is not a command.
Result<std::string> CommandHelp(const std::string& command);

// A flag value as a user would type it: doubles in their shortest exact form
// ("0.3", not gflags' "0.29999999999999999"), an empty string as "", a string
// with blanks quoted; anything else unchanged. `type` is gflags' type name
// ("double", "string", "bool", "int32", ...).
std::string ReadableFlagValue(const std::string& type, const std::string& value);

// `text` broken at spaces into lines that end by column `width` when the
// first starts at column `indent` (a longer word gets a line of its own); the
// lines after the first are indented by `indent` spaces. No final newline.
std::string WrapText(const std::string& text, int indent, int width);

}  // namespace ember::tools
