#include <gflags/gflags.h>
#include <glog/logging.h>
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <vector>

#include "engine/model_params.h"
#include "tools/commands.h"
#include "tools/help.h"

namespace ember::tools {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kDataLoss:
      return kExitUserError;
    default:
      return kExitInternalError;
  }
}

std::vector<EffectiveFlag> EffectiveFlags(const std::vector<std::string>& flag_files) {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::vector<EffectiveFlag> ours;
  for (const auto& flag : flags) {
    bool listed = flag.filename.find("tools/common_flags.cc") != std::string::npos;
    for (const std::string& file : flag_files) {
      listed = listed || flag.filename.find(file) != std::string::npos;
    }
    if (listed) ours.push_back({flag.name, flag.current_value, flag.is_default});
  }
  return ours;
}

void LogEffectiveFlags(const std::vector<std::string>& flag_files) {
  // The flags that say what a job is even at their defaults; the rest are
  // shown when set.
  static const std::set<std::string> kKeyFlags = {"model",  "batch_size", "epochs", "threads",
                                                  "plan",   "pipeline",   "format", "input",
                                                  "output", "out",        "out_format"};
  const std::vector<EffectiveFlag> flags = EffectiveFlags(flag_files);
  std::string set, key;
  for (const EffectiveFlag& flag : flags) {
    if (flag.is_default && kKeyFlags.count(flag.name) == 0) continue;
    gflags::CommandLineFlagInfo info;
    const std::string type =
        gflags::GetCommandLineFlagInfo(flag.name.c_str(), &info) ? info.type : "";
    std::string& line = flag.is_default ? key : set;
    line += " --" + flag.name + "=" + ReadableFlagValue(type, flag.value);
  }
  // Continuation lines line up under the first flag of "  defaults: ".
  constexpr int kIndent = 12;
  const auto block = [&](const std::string& flags_text) {
    return flags_text.empty() ? std::string("(none)")
                              : WrapText(flags_text.substr(1), kIndent, 100);
  };
  LOG(INFO) << "effective configuration (--v=1 lists all " << flags.size() << " flags):"
            << "\n  set:      " << block(set) << "\n  defaults: " << block(key);
  VLOG(1) << "every flag:";
  for (const EffectiveFlag& flag : flags) {
    VLOG(1) << "  --" << flag.name << "=" << flag.value << (flag.is_default ? "" : "  (set)");
  }
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) items.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

Result<std::vector<std::string>> ExpandPathList(const std::string& flag,
                                                const std::string& text) {
  std::vector<std::string> paths;
  for (const std::string& item : SplitList(text)) {
    if (item.find_first_of("*?[") == std::string::npos) {
      paths.push_back(item);
      continue;
    }
    glob_t matches{};
    const int result = ::glob(item.c_str(), 0, nullptr, &matches);
    if (result == 0) {
      for (size_t i = 0; i < matches.gl_pathc; ++i) paths.push_back(matches.gl_pathv[i]);
    }
    ::globfree(&matches);
    if (result == GLOB_NOMATCH) {
      return Status::NotFound("--", flag, ": no file matches \"", item, "\"");
    }
    if (result != 0) {
      return Status::IOError("--", flag, ": cannot expand \"", item, "\" (glob error ", result,
                             ")");
    }
  }
  return paths;
}

Result<int64_t> ParseByteSize(const std::string& flag, const std::string& text) {
  const auto invalid = [&] {
    return Status::InvalidArgument("--", flag, "=", text,
                                   ": expected a size such as 512MB, 8GB or 1048576");
  };
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin || value < 0) return invalid();
  std::string unit(ptr, end);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K") {
    shift = 10;
  } else if (unit == "M") {
    shift = 20;
  } else if (unit == "G") {
    shift = 30;
  } else if (unit == "T") {
    shift = 40;
  } else {
    return invalid();
  }
  const double bytes = value * static_cast<double>(int64_t{1} << shift);
  if (bytes > 9.0e18) return invalid();
  return static_cast<int64_t>(bytes);
}

Result<std::vector<int>> ParseWidths(const std::string& flag, const std::string& text) {
  return engine::ParseWidths(flag, text);
}

}  // namespace ember::tools
