#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ember::test {

// What a command printed and how it ended.
struct CommandRun {
  int exit_code = -1;  // 128 + the signal if a signal ended it; -1 if it did not start.
  std::string output;  // stdout and stderr together.
};

// Runs `command` with /bin/sh, its stderr merged into stdout, and waits for
// it to end.
inline CommandRun RunCommand(const std::string& command) {
  CommandRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    run.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

}  // namespace ember::test
