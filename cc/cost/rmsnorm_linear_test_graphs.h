#pragma once
// The running example, rms_norm(X) · g @ W with X[m, k], g[k], W[k, n], as the
// unfused reference and as the paper's fused μGraph with a configurable grid.
#include <memory>

#include "cc/ir/graph.h"

namespace mj::cost {

struct RmsNormLinearShape {
  int64_t m = 8, k = 4096, n = 6144;
  ir::DType dtype = ir::DType::kF32;
};

inline ir::KernelGraph rmsnorm_linear_reference(const RmsNormLinearShape& s = {}) {
  ir::KernelGraph g;
  const int x = g.new_input({s.m, s.k}, s.dtype);
  const int gain = g.new_input({s.k}, s.dtype);
  const int w = g.new_input({s.k, s.n}, s.dtype);
  g.mark_output(g.matmul(g.binary(ir::OpKind::kMul, g.rms_norm(x, 1e-6), gain), w));
  return g;
}

// Grid (columns, row_blocks, 1): axis x splits W's columns; axis y, when row_blocks > 1,
// splits X's rows and replicates W, which every row block then reads again.
inline std::shared_ptr<ir::BlockGraph> fused_rmsnorm_linear_block(int columns, int forloop,
                                                              int row_blocks = 1,
                                                              const RmsNormLinearShape& s = {}) {
  auto bg = std::make_shared<ir::BlockGraph>(ir::Dim3{columns, row_blocks, 1}, forloop);
  const int split_rows = row_blocks > 1 ? 0 : -1;
  const int cols = columns > 1 ? 1 : -1;
  const int x = bg->new_input({s.m, s.k}, s.dtype, {-1, split_rows, -1}, 1);
  const int gain = bg->new_input({s.k}, s.dtype, {-1, -1, -1}, 0);
  const int w = bg->new_input({s.k, s.n}, s.dtype, {cols, -1, -1}, 0);
  const int acc = bg->accum(ir::OpKind::kAccumSum, bg->matmul(bg->binary(ir::OpKind::kMul, x, gain), w));
  const int ms = bg->accum(ir::OpKind::kAccumMeanLast, bg->unary(ir::OpKind::kSquare, x));
  const int rms = bg->unary(ir::OpKind::kSqrt, bg->unary(ir::OpKind::kAddScalar, ms, 1e-6));
  bg->new_output(bg->binary(ir::OpKind::kDiv, acc, rms), {cols, split_rows, -1}, s.dtype);
  return bg;
}

inline ir::KernelGraph fused_rmsnorm_linear(int columns, int forloop, int row_blocks = 1,
                                        const RmsNormLinearShape& s = {}) {
  ir::KernelGraph g;
  const int x = g.new_input({s.m, s.k}, s.dtype);
  const int gain = g.new_input({s.k}, s.dtype);
  const int w = g.new_input({s.k, s.n}, s.dtype);
  g.mark_output(
      g.customized({x, gain, w}, fused_rmsnorm_linear_block(columns, forloop, row_blocks, s))[0]);
  return g;
}

}  // namespace mj::cost
