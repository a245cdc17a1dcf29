#pragma once

// The dense gradients of a data-parallel step all-reduced in buckets while
// the backward still runs (issue 62; PyTorch DDP's gradient buckets): the
// parameters, in backward order (the model's last first), are grouped into
// buckets of about `bucket_bytes`; once every gradient of a bucket is final
// (ops::DenseModel::set_on_gradient_ready) the backward's thread packs it
// and a communication thread of this object all-reduces it, then unpacks the
// sums into the gradients, while the backward goes on with earlier layers.
// Wait() returns once every bucket is back: the optimizer step then reads
// reduced gradients only.
//
// Exactness: each element is the rank-ordered sum of the communicator's
// AllReduce, as when the whole model is all-reduced at once, so the bits do
// not depend on the buckets. Order: the buckets are all-reduced in bucket
// order on every rank, whatever order the backward finishes them in (the
// ranks' collectives must match).
//
// Thread safety: Start and Wait from the step's thread; Ready from the
// thread that runs the backward (or its range's); `comm` is used from the
// communication thread alone (it must be a communicator of its own).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"
#include "ops/dense_model.h"

namespace ember::pipeline {

class GradientBuckets {
 public:
  // `parameters` in model order, their gradients f32 host tensors that stay
  // where they are; `comm` not owned. REQUIRES: bucket_bytes > 0.
  GradientBuckets(std::vector<ops::Parameter*> parameters, int64_t bucket_bytes,
                  Communicator* comm);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // A step's backward begins: every bucket waits for its gradients.
  void Start();
  // Parameter `parameter`'s gradient is final for this step.
  void Ready(int parameter);
  // Sends the buckets the backward did not finish (it reports every
  // parameter; this only guards against a hang) and waits for every bucket;
  // returns the first failure (later buckets are then not all-reduced).
  Status Wait();

  int buckets() const { return static_cast<int>(buckets_.size()); }
  // The parameters of bucket b, in the order they are packed.
  const std::vector<int>& bucket(int b) const { return buckets_[static_cast<size_t>(b)].members; }

 private:
  struct Bucket {
    std::vector<int> members;
    int64_t floats = 0;
    int waiting = 0;           // Gradients still to come this step.
    std::vector<float> packed;
  };
  void Pack(Bucket& bucket);
  void Run();  // The communication thread.

  const std::vector<ops::Parameter*> parameters_;
  Communicator* const comm_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;  // Per parameter.

  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<char> packed_;  // Per bucket: ready to send this step.
  int next_ = 0;              // The bucket the thread sends next.
  int done_ = 0;              // Buckets back this step.
  bool running_ = false;      // Between Start and Wait.
  bool stop_ = false;
  Status failure_;
  std::thread thread_;
};

}  // namespace ember::pipeline
