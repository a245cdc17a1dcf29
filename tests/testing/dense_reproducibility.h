#pragma once

// Whether this machine's f32 dense products give every output row the same
// bits whatever the thread count and whatever other rows share the call.
//
// Ember's bitwise guarantees across schedules, ranks and thread counts rest on
// it: pipelined and sequential training, ranks and one process, split and
// unsplit pipeline stages run the same rows through products of different
// batch sizes and thread counts. oneDNN's AVX-512 kernels (brgemm) compute a
// row of x W^T from that row alone, in a fixed order; its AVX2 GEMM (gemm:jit)
// blocks the rows and the inner dimension by the call's shape and thread
// count, so a row's last bits depend on them (seen on an AMD EPYC without
// AVX-512: predictions 1e-7 apart). Tests of those guarantees check bits where
// this holds and a tolerance of a few float ulps of the result where it does
// not, saying so on stderr.

namespace ember::test {

// Probed once per process: a fully connected forward (257 x 64 -> 32, ReLU)
// on 1, 2 and 3 threads, whole and in two uneven parts, compared bitwise.
bool DenseRowsAreReproducible();

}  // namespace ember::test
