#include "cc/testing/rmsnorm_linear.h"

namespace mj::testing {

using ir::BlockGraph;
using ir::KernelGraph;
using ir::OpKind;

KernelGraph rmsnorm_linear_reference(const RmsNormLinearShape& s, double eps) {
  KernelGraph g;
  const int x = g.new_input({s.m, s.k}, s.dtype);
  const int gain = g.new_input({s.k}, s.dtype);
  const int w = g.new_input({s.k, s.n}, s.dtype);
  g.mark_output(g.matmul(g.binary(OpKind::kMul, g.rms_norm(x, eps), gain), w));
  return g;
}

FusedRmsNormLinear column_split(int columns, int forloop, int row_blocks,
                                const RmsNormLinearShape& s) {
  const int split_rows = row_blocks > 1 ? 0 : -1;
  const int cols = columns > 1 ? 1 : -1;
  FusedRmsNormLinear f;
  f.m = s.m, f.k = s.k, f.n = s.n, f.dtype = s.dtype;
  f.grid = {columns, row_blocks, 1};
  f.forloop = forloop;
  f.x_imap = {-1, split_rows, -1};
  f.w_imap = {cols, -1, -1};
  f.omap = {cols, split_rows, -1};
  return f;
}

std::shared_ptr<BlockGraph> fused_rmsnorm_linear_block(const FusedRmsNormLinear& s) {
  auto bg = std::make_shared<BlockGraph>(s.grid, s.forloop);
  const int x = bg->new_input({s.m, s.k}, s.dtype, s.x_imap, s.x_fmap);
  const int gain = bg->new_input({s.k}, s.dtype, {-1, -1, -1}, 0);
  const int w = bg->new_input({s.k, s.n}, s.dtype, s.w_imap, s.w_fmap);
  const int xg = bg->binary(OpKind::kMul, x, gain);
  const int acc =
      bg->accum(OpKind::kAccumSum, s.swap_matmul ? bg->matmul(w, xg) : bg->matmul(xg, w));
  int ms = bg->accum(s.rms_accum, bg->unary(OpKind::kSquare, x));
  if (s.with_eps) ms = bg->unary(OpKind::kAddScalar, ms, s.eps);
  bg->new_output(bg->binary(OpKind::kDiv, acc, bg->unary(OpKind::kSqrt, ms)), s.omap, s.dtype);
  return bg;
}

KernelGraph fused_rmsnorm_linear(const FusedRmsNormLinear& s) {
  KernelGraph g;
  const int x = g.new_input({s.m, s.k}, s.dtype);
  const int gain = g.new_input({s.k}, s.dtype);
  const int w = g.new_input({s.k, s.n}, s.dtype);
  g.mark_output(g.customized({x, gain, w}, fused_rmsnorm_linear_block(s)).at(0));
  return g;
}

}  // namespace mj::testing
