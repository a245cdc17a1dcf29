#include "core/threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "core/mutex.h"

namespace ember {
namespace {

// Debian's oneTBB is not built with ThreadSanitizer, so TSan does not see that
// a task starts after the code that spawned it and that parallel_for and
// task_arena::execute return after their tasks: everything a task reads or
// writes looks racy. Under TSan these say so by hand, through one sync
// address per call: the caller releases before the tasks (which acquire) and
// acquires after them (which release).
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
void HappensBefore(void* sync) { __tsan_release(sync); }
void HappensAfter(void* sync) { __tsan_acquire(sync); }
#else
void HappensBefore(void*) {}
void HappensAfter(void*) {}
#endif

}  // namespace

struct ThreadArena::Impl {
  explicit Impl(int threads) : arena(threads) {}
  tbb::task_arena arena;
};

ThreadArena::ThreadArena(int threads)
    : threads_(threads > 0 ? threads : HardwareThreads()),
      impl_(std::make_unique<Impl>(threads_)) {}

ThreadArena::~ThreadArena() = default;

void ThreadArena::Execute(const std::function<void()>& fn) {
  char sync;
  HappensBefore(&sync);
  impl_->arena.execute([&] {
    HappensAfter(&sync);
    fn();
    HappensBefore(&sync);
  });
  HappensAfter(&sync);
}

struct BackgroundThread::Impl {
  Mutex mu;
  CondVar cv;
  std::function<void()> fn GUARDED_BY(mu);  // Handed over by Start; empty once taken.
  bool busy GUARDED_BY(mu) = false;         // A function is handed over or running.
  bool stop GUARDED_BY(mu) = false;
  std::thread thread;

  void Loop(int threads, int nice_increment, bool only_idle_cores) {
    LowerThisThreadsPriority(nice_increment);
    if (only_idle_cores) RunThisThreadOnlyOnIdleCores();
    ThreadArena arena(threads);
    while (true) {
      std::function<void()> next;
      {
        MutexLock lock(mu);
        cv.Wait(mu, [&]() REQUIRES(mu) { return stop || fn != nullptr; });
        if (fn == nullptr) return;
        next = std::exchange(fn, nullptr);
      }
      arena.Execute(next);
      MutexLock lock(mu);
      busy = false;
      cv.NotifyAll();
    }
  }
};

BackgroundThread::BackgroundThread(int threads, int nice_increment, bool only_idle_cores)
    : impl_(std::make_unique<Impl>()) {
  impl_->thread = std::thread([this, threads, nice_increment, only_idle_cores] {
    impl_->Loop(threads, nice_increment, only_idle_cores);
  });
}

BackgroundThread::~BackgroundThread() {
  Wait();
  {
    MutexLock lock(impl_->mu);
    impl_->stop = true;
    impl_->cv.NotifyAll();
  }
  impl_->thread.join();
}

void BackgroundThread::Start(std::function<void()> fn) {
  Wait();
  MutexLock lock(impl_->mu);
  impl_->fn = std::move(fn);
  impl_->busy = true;
  impl_->cv.NotifyAll();
}

void BackgroundThread::Wait() {
  MutexLock lock(impl_->mu);
  impl_->cv.Wait(impl_->mu, [&]() REQUIRES(impl_->mu) { return !impl_->busy; });
}

void ParallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& body) {
  if (end <= begin) return;
  if (grain < 1) grain = 1;
  if (end - begin <= grain) {
    body(begin, end);
    return;
  }
  char sync;
  HappensBefore(&sync);
  tbb::parallel_for(tbb::blocked_range<int64_t>(begin, end, grain),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      HappensAfter(&sync);
                      body(r.begin(), r.end());
                      HappensBefore(&sync);
                    });
  HappensAfter(&sync);
}

int HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void SetOpenMpThreads(int threads) { omp_set_num_threads(threads > 0 ? threads : 1); }

int OpenMpThreads() { return omp_get_max_threads(); }

int CurrentArenaThreads() { return oneapi::tbb::this_task_arena::max_concurrency(); }

int ThisThreadsNiceValue() {
  const id_t tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, tid);
  return nice == -1 && errno != 0 ? 0 : nice;
}

double ProcessCpuSeconds() {
  timespec t;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

double ProcessRunQueueWaitSeconds() {
  std::error_code error;
  double seconds = 0.0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream in(task.path() / "schedstat");
    unsigned long long running_ns = 0, waiting_ns = 0;
    if (in >> running_ns >> waiting_ns) seconds += static_cast<double>(waiting_ns) * 1e-9;
  }
  return seconds;
}

void LowerThisThreadsPriority(int increment) {
  if (increment <= 0) return;
  const id_t tid = static_cast<id_t>(::syscall(SYS_gettid));
  ::setpriority(PRIO_PROCESS, tid, std::min(19, ThisThreadsNiceValue() + increment));
}

bool RunThisThreadOnlyOnIdleCores() {
  sched_param param{};
  param.sched_priority = 0;  // The only one SCHED_IDLE takes.
  return ::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &param) == 0;
}

bool ThisThreadRunsOnlyOnIdleCores() {
  int policy = 0;
  sched_param param{};
  return ::pthread_getschedparam(::pthread_self(), &policy, &param) == 0 && policy == SCHED_IDLE;
}

void EnsurePassiveOpenMpWaitPolicy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace ember
