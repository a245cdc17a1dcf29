#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/mlp.h"

namespace ember::engine {

struct DlrmOptions {
  int num_dense = 13;
  int num_slots = 26;
  int embedding_dim = 16;
  // Widths of the bottom MLP after the dense input. Its output is one of the
  // interacting vectors, so it must be embedding_dim wide: when the last
  // width differs, a final layer to embedding_dim is added ({512, 256, 64}
  // and {512, 256, 64, 16} give the same network for dim 16).
  std::vector<int> bottom_mlp = {512, 256, 64};
  // Widths of the top MLP before the final logit.
  std::vector<int> top_mlp = {512, 256};
  uint64_t seed = 1;
};

// The dense half of DLRM (Naumov et al. 2019): bottom MLP over the dense
// features, dot interaction of its output with the pooled embeddings of every
// slot, top MLP over [bottom output, interactions] down to one logit.
// Thread safety: none; one model belongs to one dense stage.
class DlrmModel {
 public:
  // Fails with InvalidArgument on inconsistent options.
  static Result<std::unique_ptr<DlrmModel>> Create(const DlrmOptions& options);

  // logits[B, 1] from dense[B, num_dense] and pooled[B, num_slots * dim].
  // The inputs must stay alive and unchanged until Backward.
  Status Forward(const Tensor& dense, const Tensor& pooled, Tensor* logits);
  // From dlogits[B, 1] (after Forward), fills every parameter's grad and
  // dpooled[B, num_slots * dim].
  Status Backward(const Tensor& dlogits, Tensor* dpooled);

  std::vector<Parameter*> parameters();
  const DlrmOptions& options() const { return options_; }
  // Multiply-adds x2 of one example's forward pass.
  int64_t forward_flops_per_example() const;

 private:
  explicit DlrmModel(const DlrmOptions& options);
  void EnsureBatch(int64_t batch);

  DlrmOptions options_;
  int num_pairs_;
  Mlp bottom_;
  Mlp top_;
  int64_t batch_ = -1;
  Tensor bottom_out_;   // [B, D]
  Tensor features_;     // [B, (S + 1) * D]: bottom output then each slot.
  Tensor interactions_;  // [B, P]
  Tensor top_in_;        // [B, D + P]
  Tensor dtop_in_;
  Tensor dinteractions_;
  Tensor dbottom_direct_;  // [B, D], from the top MLP's input.
  Tensor dfeatures_;       // [B, (S + 1) * D]
  Tensor dbottom_feature_;  // [B, D], from the interaction.
};

}  // namespace ember::engine
