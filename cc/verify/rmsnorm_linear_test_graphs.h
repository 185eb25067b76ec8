#pragma once
// The paper's RMSNorm + Linear pair, for the verifier's tests: the reference kernel graph
// rms_norm(X) * G @ W, and the fused one-kernel block graph that divides by the rms after the
// matmul, with knobs that produce the mutants a verifier must reject.
#include <memory>

#include "cc/ir/graph.h"

namespace mj::verify {

struct FusedRmsNormLinear {
  int64_t m = 4, k = 64, n = 96;
  ir::Dim3 grid{6, 1, 1};
  int forloop = 4;
  ir::Dim3 x_imap{-1, -1, -1};
  int x_fmap = 1;
  ir::Dim3 w_imap{1, -1, -1};
  int w_fmap = 0;
  ir::Dim3 omap{1, -1, -1};
  ir::OpKind rms_accum = ir::OpKind::kAccumMeanLast;  // the mean of x^2 over the loop and the tile
  bool swap_matmul = false;                   // W @ (X * G) instead of (X * G) @ W
  bool with_eps = true;
  double eps = 1e-6;
};

inline ir::KernelGraph reference_rmsnorm_linear(int64_t m, int64_t k, int64_t n, double eps = 1e-6) {
  ir::KernelGraph g;
  const int x = g.new_input({m, k}, ir::DType::kF32);
  const int gain = g.new_input({k}, ir::DType::kF32);
  const int w = g.new_input({k, n}, ir::DType::kF32);
  const int scaled = g.binary(ir::OpKind::kMul, g.rms_norm(x, eps), gain);
  g.mark_output(g.matmul(scaled, w));
  return g;
}

inline ir::KernelGraph fused_rmsnorm_linear(const FusedRmsNormLinear& s) {
  auto bg = std::make_shared<ir::BlockGraph>(s.grid, s.forloop);
  const int x = bg->new_input({s.m, s.k}, ir::DType::kF32, s.x_imap, s.x_fmap);
  const int gain = bg->new_input({s.k}, ir::DType::kF32, {-1, -1, -1}, 0);
  const int w = bg->new_input({s.k, s.n}, ir::DType::kF32, s.w_imap, s.w_fmap);
  const int xg = bg->binary(ir::OpKind::kMul, x, gain);
  const int prod = s.swap_matmul ? bg->matmul(w, xg) : bg->matmul(xg, w);
  const int acc = bg->accum(ir::OpKind::kAccumSum, prod);
  int ms = bg->accum(s.rms_accum, bg->unary(ir::OpKind::kSquare, x));
  if (s.with_eps) ms = bg->unary(ir::OpKind::kAddScalar, ms, s.eps);
  bg->new_output(bg->binary(ir::OpKind::kDiv, acc, bg->unary(ir::OpKind::kSqrt, ms)), s.omap,
                 ir::DType::kF32);
  ir::KernelGraph g;
  const int kx = g.new_input({s.m, s.k}, ir::DType::kF32);
  const int kg = g.new_input({s.k}, ir::DType::kF32);
  const int kw = g.new_input({s.k, s.n}, ir::DType::kF32);
  g.mark_output(g.customized({kx, kg, kw}, bg).at(0));
  return g;
}

}  // namespace mj::verify
