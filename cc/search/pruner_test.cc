#include "cc/search/pruner.h"

#include <gtest/gtest.h>

#include "cc/absexpr/derive.h"
#include "cc/search/search_test_graphs.h"

namespace mj::search {

using absexpr::abstract_expressions;
using absexpr::ExprId;
using absexpr::ExprOp;
using ir::BlockGraph;
using ir::DType;
using ir::OpKind;

namespace {

// The tensors of the paper's fused RMSNorm + Linear block graph are all subexpressions of
// the target and its result is the target's output; a wrong op or a foreign constant is not.
TEST(Pruner, AdmitsTheFusedRmsNormLinearAndRejectsWrongOps) {
  const auto pt = make_pruning_target(testing::rmsnorm_linear_reference({8, 256, 64}), {});
  Pruner pruner(pt.get());
  BlockGraph bg({2, 1, 1}, 4);
  const int x = bg.new_input({8, 256}, DType::kF32, {-1, -1, -1}, 1);
  const int s = bg.new_input({256}, DType::kF32, {-1, -1, -1}, 0);
  const int w = bg.new_input({256, 64}, DType::kF32, {1, -1, -1}, 0);
  const int xs = bg.binary(OpKind::kMul, x, s);
  const int xw = bg.matmul(xs, w);
  const int acc = bg.accum(OpKind::kAccumSum, xw);
  const int rms = bg.accum(OpKind::kAccumRmsLast, x, 1e-6);
  const int y = bg.binary(OpKind::kDiv, acc, rms);
  const int wrong = bg.unary(OpKind::kExp, x);
  const int wrong_eps = bg.accum(OpKind::kAccumRmsLast, x, 1e-5);
  const auto e =
      abstract_expressions(bg, {pruner.input(0), pruner.input(1), pruner.input(2)}, pruner.pool());
  for (int t : {xs, xw, acc, rms, y}) {
    EXPECT_TRUE(pruner.admits(e[t])) << pruner.pool().to_string(e[t]);
  }
  EXPECT_TRUE(pruner.matches_output(e[y], 0));
  EXPECT_FALSE(pruner.matches_output(e[acc], 0));
  EXPECT_FALSE(pruner.admits(e[wrong]));
  EXPECT_FALSE(pruner.admits(e[wrong_eps]));  // a constant the target does not have
}

TEST(Pruner, WithoutATargetEverythingIsAdmitted) {
  Pruner off(nullptr);
  EXPECT_FALSE(off.enabled());
  const ExprId e = off.pool().unary(ExprOp::kExp, off.input(0));
  EXPECT_TRUE(off.admits(e));
  EXPECT_TRUE(off.matches_output(e, 0));
}

}  // namespace
}  // namespace mj::search
