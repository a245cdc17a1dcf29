#pragma once

#include <sys/resource.h>

namespace ember::bench {

// CPU seconds the whole process (every thread, user and system) has used so
// far: with the wall time of a case, what it actually got on a shared machine.
inline double ProcessCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace ember::bench
