#pragma once

// Liveness of one rank that the others may wait for longer than a rank
// timeout: a pipeline's stages wait for rank 0's next command while rank 0
// reads the data, evaluates or writes a checkpoint, which may take minutes.
// Those waits are bounded by the heartbeat instead of by their own timeout:
//
// * on the root, a thread sends an empty message to every other rank every
//   timeout/4 (at most every 5 s) on a communicator of its own;
// * on every other rank, a thread receives them; when none has come for
//   timeout_seconds (the communicator's own timeout), it calls on_silence
//   with that DeadlineExceeded ("heartbeat: rank 0 did not answer within
//   60 s"), and the caller aborts its other communicators with it, so that
//   whatever waits there fails at once naming the root.
//
// A root that is alive but whose step thread is stuck still sends; the
// waits of a step are bounded by their own timeouts. A stopped (SIGSTOP) or
// killed root sends nothing and is named after timeout_seconds.
//
// Thread safety: the communicator belongs to the heartbeat's thread; the
// object is created and destroyed on one thread.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/communicator.h"
#include "core/status.h"

namespace ember {

class Heartbeat {
 public:
  // Starts the sender (comm->rank() == root) or the watcher (any other
  // rank). `on_silence` runs on the watcher's thread, once at most, only
  // for a root that fell silent (DeadlineExceeded), not when the root or
  // this rank ends the heartbeat. REQUIRES: comm has size() > 1; its
  // timeout is the rank timeout.
  Heartbeat(Communicator* comm, int root, double timeout_seconds,
            std::function<void(const Status&)> on_silence);
  // Stops the thread and aborts the communicator: the peers see the
  // heartbeat end, which is not silence.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Seconds between two beats of a root for a rank timeout of `timeout_seconds`.
  static double IntervalSeconds(double timeout_seconds);

 private:
  void Send(double interval_seconds);
  void Watch();

  Communicator* const comm_;
  const int root_;
  const std::function<void(const Status&)> on_silence_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // Guarded by mu_.
  std::thread thread_;
};

}  // namespace ember
