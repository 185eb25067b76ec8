// Softmax attention and its online-softmax kernel: the stabilizing max disappears from both
// sides (it is the constant 0, as in the fingerprints), so the fused kernel's accumulators
// are subexpressions of the reference, and a kernel that forgets the normalization or the
// scale is pruned.
#include <gtest/gtest.h>

#include <memory>

#include "cc/absexpr/derive.h"
#include "cc/absexpr/subexpression.h"

namespace mj::absexpr {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;

namespace {

constexpr double kScale = 0.125;

struct Attention {
  ExprPool pool;
  std::unique_ptr<SaturatedTarget> target;

  Attention() {
    // Q[2, 16, 8], K^T[2, 8, 64], V[2, 64, 8]: two heads, 16 queries, 64 keys, d = 8.
    KernelGraph ref;
    const int q = ref.new_input({2, 16, 8}, DType::kF32);
    const int k = ref.new_input({2, 8, 64}, DType::kF32);
    const int v = ref.new_input({2, 64, 8}, DType::kF32);
    const int s = ref.unary(OpKind::kMulScalar, ref.matmul(q, k), kScale);
    const int e =
        ref.unary(OpKind::kExp, ref.binary(OpKind::kSub, s, ref.reduce(s, -1, ReduceKind::kMax)));
    const int p = ref.binary(OpKind::kDiv, e, ref.reduce(e, -1, ReduceKind::kSum));
    const int o = ref.matmul(p, v);
    ref.mark_output(o);
    const std::vector<ExprId> exprs = abstract_expressions(ref, pool);
    target = std::make_unique<SaturatedTarget>(saturate_target(pool, {exprs[o]}));
  }

  struct Fused {
    std::vector<ExprId> exprs;  // every block tensor
    ExprId scores, numerator, denominator, running_max, out;
  };
  // The online-softmax kernel: one block per head, 4 iterations of 16 keys.
  // `normalize` false leaves out the division by the exp-sum, `scale` false the 1/sqrt(d).
  Fused fused(bool normalize, bool scale) {
    BlockGraph bg(Dim3{2, 1, 1}, 4);
    const int q = bg.new_input({2, 16, 8}, DType::kF32, {0, -1, -1}, -1);
    const int k = bg.new_input({2, 8, 64}, DType::kF32, {0, -1, -1}, 2);
    const int v = bg.new_input({2, 64, 8}, DType::kF32, {0, -1, -1}, 1);
    int s = bg.matmul(q, k);
    if (scale) s = bg.unary(OpKind::kMulScalar, s, kScale);
    const int acc = bg.accum_exp_matmul(s, v);
    const int z = bg.accum(OpKind::kAccumExpSumLast, s);
    const int m = bg.accum(OpKind::kAccumMaxLast, s);
    const int o = normalize ? bg.binary(OpKind::kDiv, acc, z) : acc;
    bg.new_output(o, {0, -1, -1}, DType::kF32);
    bg.new_output(m, {0, -1, -1}, DType::kF32);
    Fused f;
    f.exprs = abstract_expressions(bg, {pool.var(0), pool.var(1), pool.var(2)}, pool);
    f.scores = f.exprs[s];
    f.numerator = f.exprs[acc];
    f.denominator = f.exprs[z];
    f.running_max = f.exprs[m];
    f.out = f.exprs[o];
    return f;
  }
};

TEST(AttentionPruning, EveryTensorOfTheOnlineSoftmaxKernelSurvives) {
  Attention a;
  ASSERT_TRUE(a.target->complete()) << a.target->report.to_string();
  SubexpressionOracle oracle(a.target->egraph);
  const Attention::Fused f = a.fused(true, true);
  for (ExprId e : f.exprs) EXPECT_TRUE(oracle.contains(a.pool, e)) << a.pool.to_string(e);
  EXPECT_EQ(a.pool.to_string(f.running_max), "0");
  EXPECT_EQ(a.pool.to_string(f.denominator), "(sum 64 (exp (mul (sum 8 (mul x0 x1)) 1/8)))");
  const Placement out = oracle.place(a.pool, f.out);
  ASSERT_EQ(out.kind, Placement::kClass);
  EXPECT_EQ(out.cls, a.target->roots[0]);
}

TEST(AttentionPruning, AMissingScaleIsPrunedAMissingNormalizationIsNot) {
  Attention a;
  SubexpressionOracle oracle(a.target->egraph);
  const Attention::Fused unscaled = a.fused(true, false);
  EXPECT_TRUE(oracle.contains(a.pool, unscaled.scores));  // q@k alone is part of the target
  EXPECT_FALSE(oracle.contains(a.pool, unscaled.numerator));
  EXPECT_FALSE(oracle.contains(a.pool, unscaled.denominator));
  // Without the division every tensor is still a subexpression (the numerator is one), so
  // only the verifier can reject this graph.
  const Attention::Fused unnormalized = a.fused(false, true);
  for (ExprId e : unnormalized.exprs) EXPECT_TRUE(oracle.contains(a.pool, e));
}

}  // namespace
}  // namespace mj::absexpr
