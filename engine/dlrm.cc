#include "engine/dlrm.h"

namespace ember::engine {
namespace {

// {input, hidden..., output}, where `output` is not repeated when the last
// hidden width already equals it.
std::vector<int> Widths(int input, const std::vector<int>& hidden, int output) {
  std::vector<int> widths = {input};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  if (widths.back() != output) widths.push_back(output);
  return widths;
}

}  // namespace

Result<std::unique_ptr<DlrmModel>> DlrmModel::Create(const DlrmOptions& options) {
  if (options.num_dense < 0) {
    return Status::InvalidArgument("DLRM dense feature count must be >= 0, got ",
                                   options.num_dense);
  }
  if (options.num_slots < 1) {
    return Status::InvalidArgument("DLRM needs at least one categorical slot");
  }
  if (options.embedding_dim < 1) {
    return Status::InvalidArgument("--embedding_dim must be positive, got ",
                                   options.embedding_dim);
  }
  for (int w : options.bottom_mlp) {
    if (w < 1) return Status::InvalidArgument("--bottom_mlp widths must be positive, got ", w);
  }
  for (int w : options.top_mlp) {
    if (w < 1) return Status::InvalidArgument("--top_mlp widths must be positive, got ", w);
  }
  return std::unique_ptr<DlrmModel>(new DlrmModel(options));
}

DlrmModel::DlrmModel(const DlrmOptions& options)
    : options_(options),
      num_pairs_(num_features() * (num_features() - 1) / 2),
      top_(Widths(static_cast<int>(direct_width()) + num_pairs_, options.top_mlp, 1),
           ops::Activation::kNone, options.seed, /*stream=*/2) {
  if (has_dense()) {
    bottom_.emplace(Widths(options.num_dense, options.bottom_mlp, options.embedding_dim),
                    HiddenActivation(), options.seed, /*stream=*/1);
  }
}

int64_t DlrmModel::direct_width() const {
  const int64_t dim = options_.embedding_dim;
  return has_dense() ? dim : options_.num_slots * dim;
}

void DlrmModel::EnsureBatch(int64_t batch) {
  if (batch == batch_) return;
  const int dim = options_.embedding_dim;
  const int64_t feature_width = static_cast<int64_t>(num_features()) * dim;
  features_ = Tensor::Empty({batch, feature_width});
  interactions_ = Tensor::Empty({batch, num_pairs_});
  top_in_ = Tensor::Empty({batch, direct_width() + num_pairs_});
  dtop_in_ = Tensor::Empty({batch, direct_width() + num_pairs_});
  dinteractions_ = Tensor::Empty({batch, num_pairs_});
  dbottom_direct_ = Tensor::Empty({batch, direct_width()});
  dfeatures_ = Tensor::Empty({batch, feature_width});
  dbottom_feature_ = Tensor::Empty({batch, dim});
  batch_ = batch;
}

Status DlrmModel::Forward(const Tensor& dense, const Tensor& pooled, Tensor* logits) {
  const int64_t batch = pooled.ndim() == 2 ? pooled.dim(0) : -1;
  const int64_t pooled_width = static_cast<int64_t>(options_.num_slots) * options_.embedding_dim;
  if (batch < 0 || pooled.dim(1) != pooled_width ||
      (has_dense() && (dense.ndim() != 2 || dense.dim(0) != batch))) {
    return Status::InvalidArgument("DLRM pooled embeddings ", pooled.DebugString(),
                                   " do not match dense ", dense.DebugString(), " and width ",
                                   pooled_width);
  }
  EnsureBatch(batch);
  const Tensor features_3d = features_.Reshape({batch, num_features(), options_.embedding_dim});
  if (has_dense()) {
    EMBER_RETURN_IF_ERROR(bottom_->Forward(dense, &bottom_out_));
    EMBER_RETURN_IF_ERROR(ops::ConcatColumns({bottom_out_, pooled}, &features_));
    EMBER_RETURN_IF_ERROR(ops::DotInteractionForward(features_3d, &interactions_));
    EMBER_RETURN_IF_ERROR(ops::ConcatColumns({bottom_out_, interactions_}, &top_in_));
  } else {
    EMBER_RETURN_IF_ERROR(ops::ConcatColumns({pooled}, &features_));
    EMBER_RETURN_IF_ERROR(ops::DotInteractionForward(features_3d, &interactions_));
    EMBER_RETURN_IF_ERROR(ops::ConcatColumns({pooled, interactions_}, &top_in_));
  }
  return top_.Forward(top_in_, logits);
}

Status DlrmModel::Backward(const Tensor& dlogits, Tensor* dpooled) {
  const int64_t batch = batch_;
  EMBER_RETURN_IF_ERROR(top_.Backward(dlogits, &dtop_in_));
  std::vector<Tensor> top_parts = {dbottom_direct_, dinteractions_};
  EMBER_RETURN_IF_ERROR(ops::SplitColumns(dtop_in_, &top_parts));
  const Tensor features_3d = features_.Reshape({batch, num_features(), options_.embedding_dim});
  Tensor dfeatures_3d = dfeatures_.Reshape(features_3d.shape());
  EMBER_RETURN_IF_ERROR(
      ops::DotInteractionBackward(features_3d, dinteractions_, &dfeatures_3d));
  if (!has_dense()) {
    // The pooled embeddings feed both the interaction and the top MLP.
    float* out = dpooled->data<float>();
    const float* from_interaction = dfeatures_.data<float>();
    const float* direct = dbottom_direct_.data<float>();
    for (int64_t i = 0; i < dfeatures_.numel(); ++i) out[i] = from_interaction[i] + direct[i];
    return Status::OK();
  }
  std::vector<Tensor> feature_parts = {dbottom_feature_, *dpooled};
  EMBER_RETURN_IF_ERROR(ops::SplitColumns(dfeatures_, &feature_parts));
  // The bottom output feeds both the top MLP and the interaction.
  float* dbottom = dbottom_feature_.data<float>();
  const float* direct = dbottom_direct_.data<float>();
  for (int64_t i = 0; i < dbottom_feature_.numel(); ++i) dbottom[i] += direct[i];
  return bottom_->Backward(dbottom_feature_, nullptr);
}

std::vector<Parameter*> DlrmModel::parameters() {
  std::vector<Parameter*> params;
  if (has_dense()) params = bottom_->parameters();
  for (Parameter* p : top_.parameters()) params.push_back(p);
  return params;
}

int64_t DlrmModel::forward_flops_per_example() const {
  const int64_t interaction =
      2LL * num_pairs_ * options_.embedding_dim;
  return (has_dense() ? bottom_->flops_per_example() : 0) + top_.flops_per_example() +
         interaction;
}

}  // namespace ember::engine
