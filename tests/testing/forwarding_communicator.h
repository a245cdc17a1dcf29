#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/communicator.h"

namespace ember::test {

// A Communicator that passes every call to the one it owns: tests derive
// from it and override Send, Recv or SendRecvGroup to inject failures or
// other send semantics.
class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(std::unique_ptr<Communicator> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status Send(ConstCommBuffer data, int dst, int tag) override {
    return inner_->Send(data, dst, tag);
  }
  Status Recv(CommBuffer data, int src, int tag) override { return inner_->Recv(data, src, tag); }
  Status AllReduce(ConstCommBuffer in, CommBuffer out) override {
    return inner_->AllReduce(in, out);
  }
  Status ReduceScatter(ConstCommBuffer in, CommBuffer out) override {
    return inner_->ReduceScatter(in, out);
  }
  Status AllGather(ConstCommBuffer in, CommBuffer out) override {
    return inner_->AllGather(in, out);
  }
  Status AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts, CommBuffer out,
                   const std::vector<int64_t>& recv_counts) override {
    return inner_->AllToAllV(in, send_counts, out, recv_counts);
  }
  Status Broadcast(CommBuffer data, int root) override { return inner_->Broadcast(data, root); }
  Status Barrier() override { return inner_->Barrier(); }
  std::optional<CommCounters> counters() const override { return inner_->counters(); }
  void Abort(const Status& reason) override { inner_->Abort(reason); }

 protected:
  Communicator& inner() { return *inner_; }

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace ember::test
