#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace ember {

// A budget of CPU threads for one stage, backed by a oneTBB task_arena: parallel
// loops started inside Execute() never use more than `threads` threads.
// Thread safety: Execute may be called concurrently from several threads.
class ThreadArena {
 public:
  // `threads` <= 0 means every hardware thread.
  explicit ThreadArena(int threads);
  ~ThreadArena();
  ThreadArena(const ThreadArena&) = delete;
  ThreadArena& operator=(const ThreadArena&) = delete;

  int threads() const { return threads_; }
  // Runs `fn` inside the arena and returns when it is done.
  void Execute(const std::function<void()>& fn);

 private:
  struct Impl;
  int threads_;
  std::unique_ptr<Impl> impl_;
};

// One thread that runs a function at a time for its owner: Start hands it
// one, Wait returns once it has returned. For work that overlaps the
// owner's, e.g. reading the next batch while the current one trains. The
// thread raises its nice value by `nice_increment` (LowerThisThreadsPriority),
// with `only_idle_cores` also runs only on cores the others leave idle
// (RunThisThreadOnlyOnIdleCores), and runs each function inside its own
// ThreadArena of `threads` threads.
// Thread safety: one owner thread calls Start and Wait.
class BackgroundThread {
 public:
  BackgroundThread(int threads, int nice_increment, bool only_idle_cores = false);
  // Waits for the function running, if any, then ends the thread.
  ~BackgroundThread();
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;

  // Runs `fn` on the thread. Waits first for the function started before.
  void Start(std::function<void()> fn);
  // Returns once the function started last has returned (at once if none).
  void Wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Calls body(chunk_begin, chunk_end) over [begin, end) in parallel chunks of
// at least `grain` items, in the calling thread's arena. Chunks are disjoint
// and cover the range; their order of execution is unspecified.
void ParallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& body);

// Number of hardware threads on this host.
int HardwareThreads();

// Sets the OpenMP thread count used by oneDNN primitives that are run from
// the calling thread (OpenMP's nthreads-var is per thread).
void SetOpenMpThreads(int threads);
// The OpenMP thread count of the calling thread, and the thread budget of
// the arena it runs in (the whole machine's outside any ThreadArena).
int OpenMpThreads();
int CurrentArenaThreads();

// oneDNN runs on OpenMP threads, Ember's other parallel loops on oneTBB. With
// libgomp's default wait policy, idle OpenMP threads spin for a long time and
// starve the oneTBB workers sharing their cores (measured: 20x slower
// training on 2 cores). libgomp reads OMP_WAIT_POLICY only when it is loaded,
// before main, so a program calls this first thing in main: it re-executes
// the process once (/proc/self/exe with `argv`) with OMP_WAIT_POLICY=passive.
// A value the user set is left alone; if re-executing fails the process runs
// on with the default policy (slower, not wrong).
void EnsurePassiveOpenMpWaitPolicy(char** argv);

// Raises the calling thread's nice value by `increment` (on Linux each
// thread has its own), up to 19; never lowers it. Best effort: nothing
// happens where the system refuses. For threads that should yield the cores
// to others when there are not enough for all; they still run at full speed
// on idle ones.
void LowerThisThreadsPriority(int increment);

// The calling thread's nice value (0 for a default thread).
int ThisThreadsNiceValue();

// Puts the calling thread in Linux's SCHED_IDLE class: it runs only on cores
// no other thread wants, and a thread that wakes takes the core from it at
// once. A thread at nice 19 is not that low: under the EEVDF scheduler it
// keeps a core until its slice ends (milliseconds) while a woken thread of
// the training step waits for it. Returns false, leaving the thread as it
// was, where the system refuses.
bool RunThisThreadOnlyOnIdleCores();
// Whether the calling thread is in the SCHED_IDLE class.
bool ThisThreadRunsOnlyOnIdleCores();

// CPU seconds this process has used so far, every thread's (exited ones
// included), user and system.
double ProcessCpuSeconds();

// Seconds this process's live threads have spent runnable but waiting for a
// CPU (Linux: the second field of /proc/self/task/*/schedstat), summed; 0
// where the system does not say. Its growth over a measurement, divided by
// the measurement's wall time, is how many of the process's threads were on
// average kept off a core by other work: a measurement of speed taken while
// it is large says more about the other work than about this process.
double ProcessRunQueueWaitSeconds();

}  // namespace ember
