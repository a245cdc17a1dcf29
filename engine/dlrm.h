#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "engine/mlp.h"

namespace ember::engine {

struct DlrmOptions {
  // Dense features; 0 for data without any (libSVM, libFFM), see DlrmModel.
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
// Without dense features (num_dense 0) there is no bottom MLP: the slots'
// embeddings interact among themselves and the top MLP reads [pooled
// embeddings, interactions], so that a single slot still has an input and
// every embedding keeps a direct path to the logit, as the bottom output has
// with dense features.
// Thread safety: none; one model belongs to one dense stage.
class DlrmModel {
 public:
  // Fails with InvalidArgument on inconsistent options.
  static Result<std::unique_ptr<DlrmModel>> Create(const DlrmOptions& options);

  // logits[B, 1] from dense[B, num_dense] (ignored when num_dense is 0) and
  // pooled[B, num_slots * dim].
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

  bool has_dense() const { return options_.num_dense > 0; }
  // Vectors that interact: the bottom output (with dense features) and one
  // per slot.
  int num_features() const { return options_.num_slots + (has_dense() ? 1 : 0); }
  // Width of the top MLP's direct input: the bottom output, or the pooled
  // embeddings without dense features.
  int64_t direct_width() const;

  DlrmOptions options_;
  int num_pairs_;
  std::optional<Mlp> bottom_;  // Unset without dense features.
  Mlp top_;
  int64_t batch_ = -1;
  Tensor bottom_out_;   // [B, D]
  Tensor features_;     // [B, F * D]: bottom output (if any) then each slot.
  Tensor interactions_;  // [B, P]
  Tensor top_in_;        // [B, direct_width + P]
  Tensor dtop_in_;
  Tensor dinteractions_;
  Tensor dbottom_direct_;  // [B, direct_width], from the top MLP's input.
  Tensor dfeatures_;       // [B, F * D]
  Tensor dbottom_feature_;  // [B, D], from the interaction.
};

}  // namespace ember::engine
