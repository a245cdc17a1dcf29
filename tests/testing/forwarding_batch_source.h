#pragma once

#include "io/batch_source.h"

namespace ember::test {

// A BatchSource that passes every call to `inner`: tests derive from it and
// override Next to inject failures or stop requests.
class ForwardingBatchSource : public io::BatchSource {
 public:
  explicit ForwardingBatchSource(io::BatchSource& inner) : inner_(inner) {}
  Result<bool> Next(io::Batch* out) override { return inner_.Next(out); }
  int64_t epoch() const override { return inner_.epoch(); }
  int64_t EstimatedBatches() const override { return inner_.EstimatedBatches(); }
  int num_labels() const override { return inner_.num_labels(); }
  int num_dense() const override { return inner_.num_dense(); }
  int num_slots() const override { return inner_.num_slots(); }
  Result<std::string> ResumePosition() const override { return inner_.ResumePosition(); }
  Status ResumeFrom(std::string_view position) override { return inner_.ResumeFrom(position); }

 private:
  io::BatchSource& inner_;
};

}  // namespace ember::test
