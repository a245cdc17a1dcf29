// The ember command line: `ember <command> [--flags]`.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/allocator.h"
#include "core/threads.h"
#include "tools/commands.h"
#include "tools/stop_signals.h"

namespace {

constexpr char kUsage[] =
    "ember <command> [--flag=value ...] [--flagfile=FILE]\n"
    "\n"
    "Commands:\n"
    "  train     train a CTR model and report test AUC and logloss\n"
    "            (with no --train_data: on data generated from a planted model)\n"
    "  convert   convert criteo, csv, libsvm, libffm or slot text files to\n"
    "            Ember's columnar format (the fast path for repeated epochs)\n"
    "  gen-data  write synthetic click data (criteo, csv or columnar) from a\n"
    "            planted model, with its Bayes AUC beside it\n"
    "  plan      plan a training job (the flags of train) on this host or a\n"
    "            --cluster file: placement, predicted stage times, samples/s\n"
    "            and memory, disk and bandwidth needs\n"
    "\n"
    "`ember <command> --help` lists Ember's flags with their defaults.\n"
    "Exit status: 0 success, 1 bad command line, 2 bad input or flag value,\n"
    "3 I/O failure or internal error, 128+N training stopped by signal N (SIGINT\n"
    "130, SIGTERM 143) after writing its checkpoint.";

}  // namespace

int main(int argc, char** argv) {
  ember::EnsurePassiveOpenMpWaitPolicy(argv);
  ember::TuneProcessAllocator();
  // Before any other thread exists, so that all inherit the blocked signals.
  ember::tools::StartStopSignalThread();
  gflags::SetUsageMessage(kUsage);
  gflags::SetVersionString("0.1.0");
  if (argc < 2 || argv[1][0] == '-') {
    const bool asked = argc >= 2 && (std::strcmp(argv[1], "--help") == 0 ||
                                     std::strcmp(argv[1], "-h") == 0);
    std::fprintf(asked ? stdout : stderr, "%s\n", kUsage);
    return asked ? 0 : ember::tools::kExitBadCommandLine;
  }
  const std::string command = argv[1];
  // Drop the command so that gflags sees `ember --flags...`.
  for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
  --argc;
  // Logs go to stderr unless the user asks for files with --log_dir.
  FLAGS_logtostderr = true;
  gflags::ParseCommandLineNonHelpFlags(&argc, &argv, true);
  // gflags exits with status 1 after --help; asking for help is no error, and
  // Ember's own flags are what a user wants to see, not glog's.
  std::string help, helpshort;
  gflags::GetCommandLineOption("help", &help);
  gflags::GetCommandLineOption("helpshort", &helpshort);
  if (help == "true" || helpshort == "true") {
    gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/");
    return 0;
  }
  gflags::HandleCommandLineHelpFlags();
  if (!FLAGS_log_dir.empty()) FLAGS_logtostderr = false;
  google::InitGoogleLogging("ember");
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
  if (command == "plan") return ember::tools::RunPlan();
  std::fprintf(stderr, "ember: unknown command '%s'\n\n%s\n", command.c_str(), kUsage);
  return ember::tools::kExitBadCommandLine;
}
