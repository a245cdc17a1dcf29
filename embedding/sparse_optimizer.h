#pragma once

#include "core/status.h"
#include "embedding/embedding_table.h"

// The update rules of the sparse optimizers, on one row at a time, shared by
// every tier that stores rows (memory, disk) so that they update identically.
//
// A row of `dim` weights w carries StateFloatsPerElement(type) * dim floats of
// optimizer state next to it. For a gradient g (the gradient of the loss
// w.r.t. the row, summed over the batch), element by element:
//
//   SGD:      w -= lr * g                                    (no state)
//   Adagrad:  acc += g * g;  w -= lr * g / (sqrt(acc) + eps)  (state: acc)
//
// Adagrad is the diagonal form of Duchi, Hazan & Singer, "Adaptive
// Subgradient Methods for Online Learning and Stochastic Optimization",
// JMLR 12 (2011), with acc starting at `initial_accumulator` and eps added
// to the root (the form used by TensorFlow's and PaddlePaddle's sparse
// Adagrad). Arithmetic is in float, in element order, so results do not
// depend on the caller.

namespace ember::embedding {

// Returns OK, or InvalidArgument naming the field: learning_rate must be
// finite and > 0; initial_accumulator finite and >= 0; epsilon finite and
// >= 0; type a known optimizer.
Status ValidateSparseOptimizerOptions(const SparseOptimizerOptions& options);

// Floats of state per weight element: 0 for SGD, 1 for Adagrad.
int StateFloatsPerElement(SparseOptimizer type);

// Writes the state of a new row: nothing for SGD; `initial_accumulator` in
// each of the dim accumulators for Adagrad.
// REQUIRES: state has room for StateFloatsPerElement(options.type) * dim floats.
void InitOptimizerState(const SparseOptimizerOptions& options, int dim, float* state);

// w -= lr * g over dim elements.
void SgdUpdate(float learning_rate, int dim, const float* grad, float* weights);

// acc += g * g; w -= lr * g / (sqrt(acc) + eps) over dim elements.
void AdagradUpdate(float learning_rate, float epsilon, int dim, const float* grad,
                   float* weights, float* accumulator);

// Applies the optimizer of `options` to one row: `weights` (dim floats) and
// its `state` (StateFloatsPerElement * dim floats; may be null for SGD).
// REQUIRES: options passed ValidateSparseOptimizerOptions; the three arrays
// do not overlap.
void ApplySparseOptimizer(const SparseOptimizerOptions& options, int dim, const float* grad,
                          float* weights, float* state);

}  // namespace ember::embedding
