#include "pipeline/gradient_buckets.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

namespace ember::pipeline {

GradientBuckets::GradientBuckets(std::vector<ops::Parameter*> parameters, int64_t bucket_bytes,
                                 Communicator* comm)
    : parameters_(std::move(parameters)), comm_(comm) {
  CHECK(bucket_bytes > 0) << "bucket bytes " << bucket_bytes;
  const int n = static_cast<int>(parameters_.size());
  bucket_of_.assign(n, -1);
  // Backward order: the model's last parameters are ready first.
  Bucket current;
  for (int i = n - 1; i >= 0; --i) {
    current.members.push_back(i);
    current.floats += parameters_[i]->grad.numel();
    if (current.floats * static_cast<int64_t>(sizeof(float)) >= bucket_bytes) {
      buckets_.push_back(std::move(current));
      current = Bucket();
    }
  }
  if (!current.members.empty()) buckets_.push_back(std::move(current));
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int i : buckets_[b].members) bucket_of_[i] = static_cast<int>(b);
    buckets_[b].packed.resize(static_cast<size_t>(buckets_[b].floats));
  }
  packed_.assign(buckets_.size(), 0);
  thread_ = std::thread([this] { Run(); });
}

GradientBuckets::~GradientBuckets() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void GradientBuckets::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Bucket& bucket : buckets_) bucket.waiting = static_cast<int>(bucket.members.size());
  std::fill(packed_.begin(), packed_.end(), 0);
  next_ = 0;
  done_ = 0;
  failure_ = Status::OK();
  running_ = true;
}

void GradientBuckets::Pack(Bucket& bucket) {
  float* to = bucket.packed.data();
  for (int i : bucket.members) {
    const Tensor& grad = parameters_[i]->grad;
    to = std::copy_n(grad.data<float>(), grad.numel(), to);
  }
}

void GradientBuckets::Ready(int parameter) {
  const int b = bucket_of_[static_cast<size_t>(parameter)];
  Bucket& bucket = buckets_[static_cast<size_t>(b)];
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_ || bucket.waiting == 0 || --bucket.waiting > 0) return;
  }
  Pack(bucket);
  {
    std::lock_guard<std::mutex> lock(mu_);
    packed_[static_cast<size_t>(b)] = 1;
  }
  changed_.notify_all();
}

Status GradientBuckets::Wait() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (packed_[b]) continue;
      buckets_[b].waiting = 0;
    }
    Pack(buckets_[b]);
    std::lock_guard<std::mutex> lock(mu_);
    packed_[b] = 1;
  }
  changed_.notify_all();
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return done_ == buckets() || !failure_.ok(); });
  running_ = false;
  return failure_;
}

void GradientBuckets::Run() {
  while (true) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] {
      return stop_ || (running_ && failure_.ok() && next_ < buckets() &&
                       packed_[static_cast<size_t>(next_)]);
    });
    if (stop_) return;
    Bucket& bucket = buckets_[static_cast<size_t>(next_)];
    const int b = next_;
    lock.unlock();
    Status status = comm_->AllReduce(bucket.packed, bucket.packed);
    if (status.ok()) {
      const float* from = bucket.packed.data();
      for (int i : bucket.members) {
        Tensor& grad = parameters_[i]->grad;
        std::copy_n(from, grad.numel(), grad.data<float>());
        from += grad.numel();
      }
    }
    lock.lock();
    if (!status.ok()) {
      failure_ = status.WithContext("all-reducing dense gradient bucket " + std::to_string(b) +
                                    " of " + std::to_string(buckets()));
    }
    ++next_;
    ++done_;
    lock.unlock();
    changed_.notify_all();
  }
}

}  // namespace ember::pipeline
