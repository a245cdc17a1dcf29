#pragma once

#include <cmath>
#include <vector>

#include "embedding/embedding_table.h"

// Plain double-precision references of the sparse optimizers' formulas
// (embedding/sparse_optimizer.h), written from the papers, for tests.

namespace ember::embedding {

// One row's weights and optimizer state, in double.
struct ReferenceRow {
  std::vector<double> w;
  std::vector<double> acc;  // Adagrad's acc (row-wise: acc[0]); FTRL's n
  std::vector<double> m;    // Adam
  std::vector<double> v;    // Adam
  std::vector<double> z;    // FTRL
  double t = 0;             // Adam: this row's steps

  ReferenceRow(const SparseOptimizerOptions& options, const float* init, int dim)
      : w(init, init + dim),
        acc(dim, options.initial_accumulator),
        m(dim, 0.0),
        v(dim, 0.0),
        z(dim, 0.0) {}
};

// FTRL-Proximal's closed-form weight (McMahan et al. 2013, Algorithm 1).
inline double ReferenceFtrlWeight(const SparseOptimizerOptions& o, double z, double n) {
  if (std::abs(z) <= o.l1) return 0.0;
  const double sign = z < 0 ? -1.0 : 1.0;
  return -(z - sign * o.l1) /
         ((double{o.ftrl_beta} + std::sqrt(n)) / double{o.learning_rate} + o.l2);
}

// Applies one step of options.type to `row` with gradient `g` (dim floats).
inline void ReferenceStep(const SparseOptimizerOptions& o, const float* g, ReferenceRow& row) {
  const double lr = o.learning_rate;
  const double eps = o.epsilon;
  const size_t dim = row.w.size();
  row.t += 1;
  if (o.type == SparseOptimizer::kRowWiseAdagrad) {
    double mean_square = 0;
    for (size_t e = 0; e < dim; ++e) mean_square += double{g[e]} * g[e] / dim;
    row.acc[0] += mean_square;
    for (size_t e = 0; e < dim; ++e) row.w[e] -= lr * g[e] / (std::sqrt(row.acc[0]) + eps);
    return;
  }
  for (size_t e = 0; e < dim; ++e) {
    const double ge = g[e];
    switch (o.type) {
      case SparseOptimizer::kSgd:
        row.w[e] -= lr * ge;
        break;
      case SparseOptimizer::kAdagrad:
        row.acc[e] += ge * ge;
        row.w[e] -= lr * ge / (std::sqrt(row.acc[e]) + eps);
        break;
      case SparseOptimizer::kAdam: {
        const double b1 = o.beta1;
        const double b2 = o.beta2;
        row.m[e] = b1 * row.m[e] + (1 - b1) * ge;
        row.v[e] = b2 * row.v[e] + (1 - b2) * ge * ge;
        const double m_hat = row.m[e] / (1 - std::pow(b1, row.t));
        const double v_hat = row.v[e] / (1 - std::pow(b2, row.t));
        row.w[e] -= lr * m_hat / (std::sqrt(v_hat) + eps);
        break;
      }
      case SparseOptimizer::kFtrl: {
        const double n = row.acc[e];
        const double sigma = (std::sqrt(n + ge * ge) - std::sqrt(n)) / lr;
        row.z[e] += ge - sigma * row.w[e];
        row.acc[e] = n + ge * ge;
        row.w[e] = ReferenceFtrlWeight(o, row.z[e], row.acc[e]);
        break;
      }
      case SparseOptimizer::kRowWiseAdagrad:
        break;  // whole rows, above
    }
  }
}

}  // namespace ember::embedding
