#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace ember::tools {

// Exit codes of the ember command (also listed in `ember --help`).
inline constexpr int kExitOk = 0;
inline constexpr int kExitBadCommandLine = 1;  // Unknown command or flag name, bad syntax.
inline constexpr int kExitUserError = 2;       // Bad input, flag value or file.
inline constexpr int kExitInternalError = 3;   // I/O failure or a bug.
// Plus the signal's number: training stopped by SIGINT (130) or SIGTERM (143)
// after writing its checkpoint and summary, as a shell reports a process the
// signal killed.
inline constexpr int kExitSignalBase = 128;

// Maps a failed Status to the exit code above.
int ExitCodeFor(const Status& status);

// Subcommands. Each reads its own flags (defined in its .cc) after gflags
// has parsed the command line, and returns an exit code.
int RunTrain();
int RunGenData();
int RunConvert();
int RunPlan();
int RunExport();
int RunEval();
int RunPredict();

// A flag of Ember's with its effective value (gflags' text of it).
struct EffectiveFlag {
  std::string name;
  std::string value;
  bool is_default = true;
};

// Every flag defined in `flag_files` (e.g. "tools/train_flags.cc") and in
// common_flags.cc, sorted by name.
std::vector<EffectiveFlag> EffectiveFlags(const std::vector<std::string>& flag_files);

// Logs the effective configuration once at start-up, in one block: the flags
// defined in `flag_files` (e.g. "tools/train_flags.cc",
// "tools/format_flags.cc") and in common_flags.cc that differ from their
// defaults, and a few key ones (--model, --batch_size, ...) at theirs. Every
// flag with its value goes to VLOG(1) (--v=1).
void LogEffectiveFlags(const std::vector<std::string>& flag_files);

// Parses "512,256,64" into widths; InvalidArgument naming `flag` otherwise.
Result<std::vector<int>> ParseWidths(const std::string& flag, const std::string& text);

// Parses a byte size such as "8GB", "32MB", "512KiB", "1.5G" or "4096"
// (K/M/G/T with or without "B", powers of 1024; case-insensitive);
// InvalidArgument naming `flag` otherwise.
Result<int64_t> ParseByteSize(const std::string& flag, const std::string& text);

// Splits a comma-separated list, dropping empty items.
std::vector<std::string> SplitList(const std::string& text);

// The files of a comma-separated list of paths and glob patterns (an item
// with '*', '?' or '[' is a pattern; its matches come sorted), in order.
// NotFound naming `flag` and the pattern when a pattern matches nothing.
Result<std::vector<std::string>> ExpandPathList(const std::string& flag, const std::string& text);

}  // namespace ember::tools
