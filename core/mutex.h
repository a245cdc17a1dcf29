#pragma once

#include <condition_variable>
#include <mutex>

// Clang thread-safety annotations; no-ops on other compilers.
#if defined(__clang__)
#define EMBER_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define EMBER_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) EMBER_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY EMBER_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) EMBER_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) EMBER_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) EMBER_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) EMBER_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) EMBER_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUDES(...) EMBER_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

namespace ember {

// A std::mutex that Clang's -Wthread-safety can reason about.
class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Waits on a condition while holding a Mutex (through its native handle).
class CondVar {
 public:
  // REQUIRES: `mu` is held; it is held again on return.
  template <typename Predicate>
  void Wait(Mutex& mu, Predicate done) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    cv_.wait(lock, done);
    lock.release();
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ember
