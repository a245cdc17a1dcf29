#include "tools/flag_check.h"

#include <gflags/gflags.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "core/file.h"

namespace ember::tools {
namespace {

// gflags follows --flagfile inside flagfiles without a bound; a file that
// includes itself would never end.
constexpr int kMaxFlagfileDepth = 16;

// How a name reads to gflags: a flag, or "noX" for a boolean X.
struct KnownFlag {
  bool known = false;
  bool is_bool = false;
  bool negated = false;  // "noX".
};

KnownFlag LookUp(const std::string& name) {
  gflags::CommandLineFlagInfo info;
  if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
    return {true, info.type == "bool", false};
  }
  if (name.starts_with("no") && gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
      info.type == "bool") {
    return {true, true, true};
  }
  return {};
}

// `text` without the one or two dashes gflags accepts before a name.
std::string_view WithoutDashes(std::string_view text) {
  if (text.starts_with('-')) text.remove_prefix(1);
  if (text.starts_with('-')) text.remove_prefix(1);
  return text;
}

std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

// "unknown flag --modle; did you mean --model?"
std::string UnknownFlagMessage(const std::string& name) {
  std::string message = "unknown flag --" + name;
  const std::string closest = ClosestFlag(name);
  if (!closest.empty()) message += "; did you mean " + closest + "?";
  return message;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

class FlagChecker {
 public:
  Status CheckArgs(const std::vector<std::string>& args);

 private:
  Status CheckFlagfiles(const std::string& list, int depth);
  Status CheckFlagfileLine(const std::string& where, std::string_view line, int depth);

  std::set<std::string> undefok_;
};

Status FlagChecker::CheckArgs(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    std::string_view body = WithoutDashes(arg);
    if (body.starts_with("undefok=")) {
      for (const std::string& name : SplitCommas(std::string(body.substr(8)))) {
        undefok_.insert(name);
      }
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    // Not a flag ("-" neither): the command reports an unexpected argument.
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string_view body = WithoutDashes(arg);
    if (body.empty()) break;  // "--" ends the flags.
    const size_t equals = body.find('=');
    const std::string name(body.substr(0, equals));
    const KnownFlag flag = LookUp(name);
    if (!flag.known) {
      if (undefok_.count(name) > 0) continue;
      return Status::InvalidArgument(UnknownFlagMessage(name));
    }
    std::string value;
    if (equals != std::string_view::npos) {
      value = std::string(body.substr(equals + 1));
    } else if (!flag.is_bool && i + 1 < args.size()) {
      value = args[++i];  // "--name value", as gflags reads it.
    }
    if (name == "flagfile") EMBER_RETURN_IF_ERROR(CheckFlagfiles(value, 1));
  }
  return Status::OK();
}

Status FlagChecker::CheckFlagfiles(const std::string& list, int depth) {
  for (const std::string& path : SplitCommas(list)) {
    if (depth > kMaxFlagfileDepth) {
      return Status::InvalidArgument("--flagfile=", path, ": flagfiles nest more than ",
                                     kMaxFlagfileDepth, " deep (does one include itself?)");
    }
    Result<std::string> text = ReadFile(path);
    if (!text.ok()) return Status::NotFound("--flagfile=", path, ": ", text.status().message());
    int line_number = 0;
    size_t start = 0;
    while (start < text->size()) {
      size_t end = text->find('\n', start);
      if (end == std::string::npos) end = text->size();
      ++line_number;
      const std::string_view line(text->data() + start, end - start);
      start = end + 1;
      EMBER_RETURN_IF_ERROR(
          CheckFlagfileLine(path + ":" + std::to_string(line_number), line, depth));
    }
  }
  return Status::OK();
}

// A flagfile line as gflags reads it: leading blanks skipped, "#" a comment,
// "-" a flag, anything else a list of program names that switches the
// following lines off unless one matches (never what an Ember job means).
Status FlagChecker::CheckFlagfileLine(const std::string& where, std::string_view line, int depth) {
  if (line.ends_with('\r')) line.remove_suffix(1);  // gflags ends lines at '\r' too.
  const std::string_view trimmed = Trimmed(line);
  if (trimmed.empty() || trimmed.front() == '#') return Status::OK();
  // gflags keeps trailing blanks: in the name ("--shuffle " names no flag)
  // or in the value ("--train_data=a.tsv " names another file).
  if (!line.ends_with(trimmed)) {
    return Status::InvalidArgument(where, ": '", trimmed,
                                   "' is followed by blanks, which gflags would read as part "
                                   "of the flag; remove them");
  }
  if (trimmed.front() != '-') {
    const size_t equals = trimmed.find('=');
    const std::string name(Trimmed(trimmed.substr(0, equals)));
    std::string hint = " (a flagfile line is --name=value, a # comment or blank)";
    if (equals != std::string_view::npos && LookUp(name).known) {
      hint = "; write --" + std::string(trimmed);
    }
    return Status::InvalidArgument(where, ": '", trimmed, "' is not a flag", hint);
  }
  const std::string_view body = WithoutDashes(trimmed);
  const size_t name_end = body.find_first_of("= \t");
  const std::string name(body.substr(0, name_end));
  const KnownFlag flag = LookUp(name);
  if (!flag.known) {
    if (undefok_.count(name) > 0) return Status::OK();
    return Status::InvalidArgument(where, ": ", UnknownFlagMessage(name));
  }
  if (name_end != std::string_view::npos && body[name_end] != '=') {
    // "--train_data /path" or "--model = deepfm": gflags looks up the name
    // with the space and the value in it, finds nothing and drops the line.
    std::string_view value = Trimmed(body.substr(name_end));
    if (value.starts_with('=')) value = Trimmed(value.substr(1));
    return Status::InvalidArgument(where, ": '", trimmed,
                                   "' separates the value with a space, and gflags would ignore "
                                   "the line; write --",
                                   name, "=", value);
  }
  const bool has_value = name_end != std::string_view::npos;
  if (flag.negated && has_value) {
    return Status::InvalidArgument(where, ": '", trimmed, "' gives a value to --", name,
                                   "; write --", name.substr(2), "=", body.substr(name_end + 1));
  }
  if (!has_value && !flag.is_bool) {
    return Status::InvalidArgument(where, ": --", name, " has no value; write --", name, "=VALUE");
  }
  if (name == "flagfile") {
    return CheckFlagfiles(std::string(body.substr(name_end + 1)), depth + 1);
  }
  return Status::OK();
}

}  // namespace

Status CheckFlagNames(const std::vector<std::string>& args) {
  FlagChecker checker;
  return checker.CheckArgs(args);
}

int EditDistance(const std::string& a, const std::string& b) {
  // d[i][j]: distance between the first i letters of a and the first j of b.
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int change = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string ClosestFlag(const std::string& name) {
  // Short names are close to many flags; allow fewer edits there.
  const int allowed = name.size() <= 4 ? 1 : name.size() <= 9 ? 2 : 3;
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::string best;
  int best_distance = allowed + 1;
  bool best_is_ours = false;
  const auto consider = [&](const std::string& spelling, bool ours) {
    const int distance = EditDistance(name, spelling);
    // On a tie, Ember's own flags before those of gflags and glog.
    if (distance < best_distance || (distance == best_distance && ours && !best_is_ours)) {
      best = "--" + spelling;
      best_distance = distance;
      best_is_ours = ours;
    }
  };
  for (const gflags::CommandLineFlagInfo& flag : flags) {
    const bool ours = flag.filename.find("tools/") != std::string::npos;
    consider(flag.name, ours);
    if (flag.type == "bool") consider("no" + flag.name, ours);
  }
  return best;
}

}  // namespace ember::tools
