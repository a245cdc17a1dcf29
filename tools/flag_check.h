#pragma once

// Checks the flag names a user gives, on the command line and in flagfiles,
// before gflags parses them. gflags ignores a flagfile line it does not know
// ("--modle=deepfm", or "--train_data /path" whose name holds the space), so a
// typo there would quietly run another job; on the command line it rejects an
// unknown name without saying what was meant.

#include <string>
#include <vector>

#include "core/status.h"

namespace ember::tools {

// Checks `args` (the arguments after the command, as a user typed them:
// "--name=value", "--name value", "--noname" for a boolean, "-name" too; "--"
// ends the flags) and every flagfile they name (--flagfile=FILE[,FILE...],
// read recursively, relative paths from the working directory as gflags
// opens them) against the flags registered with gflags. A flagfile line must
// be "--name=value", a boolean "--name"/"--noname", a "#" comment or blank.
// Returns InvalidArgument on the first problem: an unknown name (with the
// closest known flag: "did you mean --model?"), a flagfile line whose value
// follows a space (with the line rewritten with '='), a non-boolean flagfile
// line without a value, or a line that is not a flag; the message names the
// argument or FILE:LINE. NotFound when a flagfile cannot be read. Names given
// to --undefok are accepted as gflags accepts them.
Status CheckFlagNames(const std::vector<std::string>& args);

// The registered flag whose name is closest to `name` (a typo of it: a few
// letters added, dropped, changed or swapped), as the user should write it
// ("--model", or "--noshuffle" for "--noshufle"); empty when none is close.
std::string ClosestFlag(const std::string& name);

// Edit distance between `a` and `b`: insertions, deletions, substitutions and
// swaps of adjacent letters, each costing 1 (optimal string alignment).
int EditDistance(const std::string& a, const std::string& b);

}  // namespace ember::tools
