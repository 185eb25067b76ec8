#include "cc/testing/layernorm_linear.h"

namespace mj::testing {

using ir::BlockGraph;
using ir::Dim3;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;

KernelGraph layernorm_linear_reference(const LayerNormLinearShape& s, bool affine, double eps) {
  KernelGraph g;
  const int x = g.new_input({s.m, s.k}, s.dtype);
  const int gamma = affine ? g.new_input({1, s.k}, s.dtype) : -1;
  const int beta = affine ? g.new_input({1, s.k}, s.dtype) : -1;
  const int w = g.new_input({s.k, s.n}, s.dtype);
  // The frontend's order: the centered x twice (one per use), rsqrt times gamma first.
  const int mean = g.reduce(x, 1, ReduceKind::kMean);
  const int centered = g.binary(OpKind::kSub, x, mean);
  const int var =
      g.reduce(g.unary(OpKind::kSquare, g.binary(OpKind::kSub, x, mean)), 1, ReduceKind::kMean);
  int scale = g.unary(OpKind::kRsqrt, g.unary(OpKind::kAddScalar, var, eps));
  if (affine) scale = g.binary(OpKind::kMul, scale, gamma);
  int normed = g.binary(OpKind::kMul, centered, scale);
  if (affine) normed = g.binary(OpKind::kAdd, normed, beta);
  g.mark_output(g.matmul(normed, w));
  return g;
}

std::shared_ptr<BlockGraph> fused_layernorm_linear_block(const FusedLayerNormLinear& f) {
  const LayerNormLinearShape& s = f.shape;
  auto bg = std::make_shared<BlockGraph>(Dim3{f.columns, 1, 1}, f.forloop);
  const int x = bg->new_input({s.m, s.k}, s.dtype, {-1, -1, -1}, 1);
  const int x_whole = bg->new_input({s.m, s.k}, s.dtype, {-1, -1, -1}, -1);
  const int gamma = f.affine ? bg->new_input({1, s.k}, s.dtype, {-1, -1, -1}, 1) : -1;
  const int beta = f.affine ? bg->new_input({1, s.k}, s.dtype, {-1, -1, -1}, 1) : -1;
  const int w = bg->new_input({s.k, s.n}, s.dtype, {1, -1, -1}, 0);
  const int mean = bg->reduce(x_whole, 1, ReduceKind::kMean);
  const int centered = f.centered ? bg->binary(OpKind::kSub, x, mean) : x;
  const int scaled =
      f.affine && f.with_gamma ? bg->binary(OpKind::kMul, centered, gamma) : centered;
  int y = bg->accum(OpKind::kAccumSum, bg->matmul(scaled, w));
  const int spread = f.centered_variance ? centered : x;
  int rms;
  if (f.eps_inside_sqrt) {
    rms = bg->accum(OpKind::kAccumRmsLast, spread, f.eps);
  } else {
    const int mean_square = bg->accum(OpKind::kAccumMeanLast, bg->unary(OpKind::kSquare, spread));
    rms = bg->unary(OpKind::kAddScalar, bg->unary(OpKind::kSqrt, mean_square), f.eps);
  }
  y = bg->binary(OpKind::kDiv, y, rms);
  if (f.affine) {
    y = bg->binary(OpKind::kAdd, y, bg->accum(OpKind::kAccumSum, bg->matmul(beta, w)));
  }
  bg->new_output(y, {1, -1, -1}, s.dtype);
  return bg;
}

KernelGraph fused_layernorm_linear(const FusedLayerNormLinear& f) {
  const LayerNormLinearShape& s = f.shape;
  KernelGraph g;
  std::vector<int> inputs;
  const int x = g.new_input({s.m, s.k}, s.dtype);
  inputs = {x, x};
  if (f.affine) {
    inputs.push_back(g.new_input({1, s.k}, s.dtype));
    inputs.push_back(g.new_input({1, s.k}, s.dtype));
  }
  inputs.push_back(g.new_input({s.k, s.n}, s.dtype));
  g.mark_output(g.customized(inputs, fused_layernorm_linear_block(f)).at(0));
  return g;
}

}  // namespace mj::testing
