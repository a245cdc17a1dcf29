#pragma once

#include "core/status.h"
#include "embedding/embedding_table.h"

// The update rules of the sparse optimizers, on one row at a time, shared by
// every tier that stores rows (memory, disk) so that they update identically.
//
// A row of `dim` weights w carries StateFloatsPerRow(type, dim) floats of
// optimizer state next to it. For a gradient g (the gradient of the loss
// w.r.t. the row, summed over the batch), element by element:
//
//   SGD:      w -= lr * g                                    (no state)
//   Adagrad:  acc += g * g;  w -= lr * g / (sqrt(acc) + eps)  (state: acc)
//   Row-wise Adagrad:  a += sum_e(g_e^2) / dim;  w -= lr * g / (sqrt(a) + eps)
//                                                  (state: a, one float per row)
//   Adam:     t += 1 (once per row);  m = b1 m + (1 - b1) g;
//             v = b2 v + (1 - b2) g^2;
//             w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//                                                  (state: m[dim], v[dim], t)
//   FTRL:     sigma = (sqrt(n + g^2) - sqrt(n)) / alpha;  z += g - sigma w;
//             n += g^2;
//             w = 0                                          if |z| <= l1,
//             w = -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2)  else
//                                                  (state: z[dim], n[dim])
//
// Adagrad is the diagonal form of Duchi, Hazan & Singer, "Adaptive
// Subgradient Methods for Online Learning and Stochastic Optimization",
// JMLR 12 (2011), with acc starting at `initial_accumulator` and eps added
// to the root (the form used by TensorFlow's and PaddlePaddle's sparse
// Adagrad).
//
// Adam is Algorithm 1 of Kingma & Ba, "Adam: A Method for Stochastic
// Optimization", ICLR 2015, applied lazily as TensorFlow's LazyAdam and
// TorchRec do: only rows in a batch are updated, and each row counts its own
// steps t, so its bias correction uses the number of times it was pushed.
// t is stored as a float: exact up to 2^24, where it stops growing and both
// corrections are 1 to float precision anyway.
//
// FTRL is FTRL-Proximal, Algorithm 1 of McMahan et al., "Ad Click Prediction:
// a View from the Trenches", KDD 2013, with alpha = learning_rate, z starting
// at 0 and n at `initial_accumulator`. As in TensorFlow's FTRL, a new row's
// weights are its random initial value, which enters z through sigma * w at
// its first update; after any update every element of the row equals the
// closed form of its (z, n) above, including elements whose gradient was 0.
// sqrt(n + g^2) - sqrt(n) is computed as g^2 / (sqrt(n + g^2) + sqrt(n)),
// which does not cancel when g is small against n.
//
// Arithmetic is in float, in element order, so results do not depend on the
// caller.

namespace ember::embedding {

// Returns OK, or InvalidArgument naming the field: learning_rate must be
// finite and > 0; initial_accumulator finite and >= 0; epsilon finite and
// >= 0 (> 0 for Adam, whose v may be 0 where m is); beta1 and beta2 in
// [0, 1); ftrl_beta, l1 and l2 finite and >= 0; type a known optimizer.
Status ValidateSparseOptimizerOptions(const SparseOptimizerOptions& options);

// Floats of state per row of `dim` weights: 0 for SGD, dim for Adagrad,
// 2 * dim + 1 for Adam, 2 * dim for FTRL, 1 for row-wise Adagrad.
int64_t StateFloatsPerRow(SparseOptimizer type, int dim);

// Writes the state of a new row: nothing for SGD; `initial_accumulator` in
// each accumulator for Adagrad and in the row's one for row-wise Adagrad;
// m = v = 0 and t = 0 for Adam; z = 0 and n = `initial_accumulator` for FTRL.
// REQUIRES: state has room for StateFloatsPerRow(options.type, dim) floats.
void InitOptimizerState(const SparseOptimizerOptions& options, int dim, float* state);

// w -= lr * g over dim elements.
void SgdUpdate(float learning_rate, int dim, const float* grad, float* weights);

// acc += g * g; w -= lr * g / (sqrt(acc) + eps) over dim elements.
void AdagradUpdate(float learning_rate, float epsilon, int dim, const float* grad, float* weights,
                   float* accumulator);

// a += mean over the row of g * g (summed in element order); then
// w -= lr * g / (sqrt(a) + eps) over dim elements. `accumulator` is one float.
void RowWiseAdagradUpdate(float learning_rate, float epsilon, int dim, const float* grad,
                          float* weights, float* accumulator);

// One lazy Adam step of a row; `state` is m[dim], v[dim], t.
void AdamUpdate(const SparseOptimizerOptions& options, int dim, const float* grad, float* weights,
                float* state);

// One FTRL-Proximal step of a row; `state` is z[dim], n[dim].
void FtrlUpdate(const SparseOptimizerOptions& options, int dim, const float* grad, float* weights,
                float* state);

// FTRL's weight for accumulators (z, n): the closed form above.
float FtrlWeight(const SparseOptimizerOptions& options, float z, float n);

// Applies the optimizer of `options` to one row: `weights` (dim floats) and
// its `state` (StateFloatsPerRow floats; may be null for SGD).
// REQUIRES: options passed ValidateSparseOptimizerOptions; the three arrays
// do not overlap.
void ApplySparseOptimizer(const SparseOptimizerOptions& options, int dim, const float* grad,
                          float* weights, float* state);

}  // namespace ember::embedding
