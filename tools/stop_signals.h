#pragma once

// SIGINT and SIGTERM, as a long command meets them (a user's Ctrl-C, a
// preemptible scheduler's SIGTERM).
//
// They are never handled by a signal handler: a handler runs on whichever
// thread the kernel picks, on top of whatever that thread was doing, and the
// main thread of a training job is nearly always inside a oneDNN JIT kernel or
// malloc. (Delivered that way, a SIGTERM corrupted the heap in about one
// sequential training run in four.) Instead both signals are blocked in every
// thread and one thread of their own takes them with sigwait():
//   * while a StopOnSignal is alive, the first signal sets its flag (the job
//     stops at its next step boundary, writes its checkpoint and summary);
//   * a second signal, or one while no StopOnSignal is alive, ends the
//     process at once as the signal's default action would (exit status
//     128 + signal);
//   * except that a signal within a second of the request the first one made
//     is that request again, and is dropped. One request often arrives twice:
//     coreutils' `timeout` sends its signal to the command and then to its
//     whole process group, the command included, and a terminal's Ctrl-C
//     under a launcher reaches the launcher, which forwards it, and the job.
//     (Taken as a second request, it ended one of the eight runs of
//     scripts/gpu_check.sh's step e on an H200 without its metrics.) A new
//     StopOnSignal starts with no request.

#include <atomic>

namespace ember::tools {

// Blocks SIGINT and SIGTERM in the calling thread and starts the thread that
// waits for them. Call first thing in main, before any other thread exists,
// so that every thread inherits the mask. Idempotent.
void StartStopSignalThread();

// Routes the first SIGINT/SIGTERM to `*stop` while alive. One at a time.
class StopOnSignal {
 public:
  explicit StopOnSignal(std::atomic<bool>* stop);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  // The signal that set the flag (SIGINT or SIGTERM), 0 if none came.
  int signal() const;
};

}  // namespace ember::tools
