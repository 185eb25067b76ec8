#pragma once
// The paper's running example for the C++ tests, rms_norm(X) * g @ W with X[m, k], g[k],
// W[k, n]: the unfused reference, and the fused one-kernel μGraph that divides by the rms
// after the matmul, with the knobs that make the mutants a verifier must reject.
#include <cstdint>
#include <memory>

#include "cc/ir/graph.h"

namespace mj::testing {

struct RmsNormLinearShape {
  int64_t m = 8, k = 4096, n = 6144;
  ir::DType dtype = ir::DType::kF32;
};

ir::KernelGraph rmsnorm_linear_reference(const RmsNormLinearShape& s = {}, double eps = 1e-6);

struct FusedRmsNormLinear {
  int64_t m = 4, k = 64, n = 96;
  ir::DType dtype = ir::DType::kF32;
  ir::Dim3 grid{6, 1, 1};
  int forloop = 4;
  ir::Dim3 x_imap{-1, -1, -1};
  int x_fmap = 1;
  ir::Dim3 w_imap{1, -1, -1};
  int w_fmap = 0;
  ir::Dim3 omap{1, -1, -1};
  ir::OpKind rms_accum = ir::OpKind::kAccumMeanLast;  // the mean of x^2 over loop and tile
  bool swap_matmul = false;                           // W @ (X * g) instead of (X * g) @ W
  bool with_eps = true;
  double eps = 1e-6;
};

// Grid (columns, row_blocks, 1) over shape s: axis x splits W's columns; axis y, when
// row_blocks > 1, splits X's rows and replicates W, which every row block then reads again.
FusedRmsNormLinear column_split(int columns, int forloop, int row_blocks = 1,
                                const RmsNormLinearShape& s = {});

std::shared_ptr<ir::BlockGraph> fused_rmsnorm_linear_block(const FusedRmsNormLinear& s);
// One customized op running fused_rmsnorm_linear_block(s) on the three inputs.
ir::KernelGraph fused_rmsnorm_linear(const FusedRmsNormLinear& s);

}  // namespace mj::testing
