#pragma once
// LayerNorm + Linear for the C++ tests, LN(X) @ W with X[m, k], W[k, n] and, when affine,
// LN(X) = (X - mean) / sqrt(var + eps) * gamma + beta with gamma, beta [1, k]: the unfused
// reference as the frontend converts flax's nn.LayerNorm(use_fast_variance=False) (and
// Equinox's) followed by a matmul, and the fused one-kernel μGraph, with the knobs that make
// the mutants a verifier must reject.
//
// The fused graph reads X twice: whole before the loop, for the mean, and tile by tile in the
// loop, centered by that mean. The loop accumulates (X - mean)*gamma @ W and the mean square
// of X - mean (accum_rms_last), and divides after it; beta @ W is accumulated alongside. The
// single-pass form (sums of X and X^2, var = E[X^2] - mean^2, the mean correction
// mean * (gamma^T W) after the loop) is equal over the reals but cancels catastrophically in
// float32 once |mean| >> std (X = 1e4 + noise: a negative variance, NaN), so it is not the
// form the search is meant to find.
#include <cstdint>
#include <memory>

#include "cc/ir/graph.h"

namespace mj::testing {

struct LayerNormLinearShape {
  int64_t m = 8, k = 4096, n = 4096;
  ir::DType dtype = ir::DType::kF32;
};

// Inputs X, then gamma and beta when affine, then W.
ir::KernelGraph layernorm_linear_reference(const LayerNormLinearShape& s = {}, bool affine = false,
                                           double eps = 1e-6);

struct FusedLayerNormLinear {
  LayerNormLinearShape shape{4, 64, 96};
  bool affine = false;
  int columns = 6;  // grid x splits W's columns
  int forloop = 4;  // steps over k
  double eps = 1e-6;
  // Mutants (each computes something else):
  bool centered = true;           // false: X - mean left out (no mean correction)
  bool centered_variance = true;  // false: the variance is E[X^2] (without the mean^2)
  bool eps_inside_sqrt = true;    // false: sqrt(var) + eps
  bool with_gamma = true;         // false: gamma dropped (affine only)
};

std::shared_ptr<ir::BlockGraph> fused_layernorm_linear_block(const FusedLayerNormLinear& f);
// One customized op running fused_layernorm_linear_block(f), X passed to it twice.
ir::KernelGraph fused_layernorm_linear(const FusedLayerNormLinear& f);

}  // namespace mj::testing
