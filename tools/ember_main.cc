// The ember command line: `ember <command> [--flags]`.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/progress.h"
#include "core/threads.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/flag_check.h"
#include "tools/help.h"
#include "tools/model_flags.h"
#include "tools/stop_signals.h"

namespace {

bool IsHelpFlag(const std::string& arg) {
  return arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpshort" ||
         arg == "-helpshort";
}

bool IsVersionFlag(const std::string& arg) { return arg == "--version" || arg == "-version"; }

// `ember help [CMD]`, `ember --help`, `ember --version`: what to print and
// the exit status, before any flag is parsed; -1 when `args` asks for none.
int HandleHelpAndVersion(const std::vector<std::string>& args) {
  const std::string& first = args[0];
  if (IsHelpFlag(first) || (first == "help" && args.size() == 1)) {
    std::printf("%s", ember::tools::UsageText().c_str());
    return ember::tools::kExitOk;
  }
  if (IsVersionFlag(first) || first == "version") {
    std::printf("%s", ember::tools::VersionText().c_str());
    return ember::tools::kExitOk;
  }
  std::string command = first;
  if (first == "help") {
    command = args[1];
  } else {
    bool asked = false;
    for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
      if (IsVersionFlag(args[i])) {
        std::printf("%s", ember::tools::VersionText().c_str());
        return ember::tools::kExitOk;
      }
      asked = asked || IsHelpFlag(args[i]);
    }
    if (!asked) return -1;
  }
  ember::Result<std::string> help = ember::tools::CommandHelp(command);
  if (!help.ok()) {
    std::fprintf(stderr, "ember: %s\n", help.status().message().c_str());
    return ember::tools::kExitBadCommandLine;
  }
  std::printf("%s", help->c_str());
  return ember::tools::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  ember::EnsurePassiveOpenMpWaitPolicy(argv);
  ember::TuneProcessAllocator();
  // Before any other thread exists, so that all inherit the blocked signals.
  ember::tools::StartStopSignalThread();
  // The model zoo's flags come from its registry: defined before anything
  // reads or lists flags.
  ember::tools::DefineModelFlags();
  gflags::SetUsageMessage(ember::tools::UsageText());
  gflags::SetVersionString(ember::tools::VersionText());
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fprintf(stderr, "%s", ember::tools::UsageText().c_str());
    return ember::tools::kExitBadCommandLine;
  }
  if (const int exit_code = HandleHelpAndVersion(args); exit_code >= 0) return exit_code;
  const std::string command = args[0];
  if (command == "--helpfull") {  // gflags' listing of every flag, glog's included.
    gflags::ShowUsageWithFlags(argv[0]);
    return ember::tools::kExitOk;
  }
  if (!ember::tools::IsCommand(command)) {
    std::fprintf(stderr, "ember: unknown command '%s'\n\n%s", command.c_str(),
                 ember::tools::UsageText().c_str());
    return ember::tools::kExitBadCommandLine;
  }
  // gflags drops a flagfile line it does not know and names no alternative
  // for a typo on the command line: check the names first.
  const ember::Status names =
      ember::tools::CheckFlagNames(std::vector<std::string>(args.begin() + 1, args.end()));
  if (!names.ok()) {
    std::fprintf(stderr, "ember %s: %s\n(`ember help %s` lists its flags)\n", command.c_str(),
                 names.message().c_str(), command.c_str());
    return ember::tools::kExitBadCommandLine;
  }
  // Drop the command so that gflags sees `ember --flags...`.
  for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
  --argc;
  // Logs go to stderr unless the user asks for files with --log_dir.
  FLAGS_logtostderr = true;
  gflags::ParseCommandLineNonHelpFlags(&argc, &argv, true);
  gflags::HandleCommandLineHelpFlags();
  if (!FLAGS_log_dir.empty()) FLAGS_logtostderr = false;
  google::InitGoogleLogging("ember");
  ember::SetDefaultProgressSeconds(FLAGS_progress_seconds);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  LOG(INFO) << "OMP_WAIT_POLICY=" << (wait_policy ? wait_policy : "(unset)");
  if (argc > 1) {
    std::fprintf(stderr, "ember %s: unexpected argument '%s' (flags are --name=value)\n",
                 command.c_str(), argv[1]);
    return ember::tools::kExitBadCommandLine;
  }
  if (command == "train") return ember::tools::RunTrain();
  if (command == "gen-data") return ember::tools::RunGenData();
  if (command == "convert") return ember::tools::RunConvert();
  if (command == "export") return ember::tools::RunExport();
  if (command == "eval") return ember::tools::RunEval();
  if (command == "predict") return ember::tools::RunPredict();
  return ember::tools::RunPlan();
}
