// The paper's RMSNorm + Linear example (Mirage §2): every tensor of the fused
// μGraph is a subexpression of the reference program's abstract expression, so pruning keeps
// it; graphs with a wrong count, a stray exp or a wrong matmul operand are pruned.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>

#include "cc/absexpr/derive.h"
#include "cc/absexpr/subexpression.h"

namespace mj::absexpr {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;

namespace {

constexpr double kEps = 1e-6;

class RmsNormLinearPruning : public ::testing::Test {
 protected:
  // Saturated once for the whole suite, as the search does.
  static void SetUpTestSuite() {
    pool_ = new ExprPool;
    KernelGraph ref;
    const int x = ref.new_input({8, 4096}, DType::kF32);
    const int g = ref.new_input({4096}, DType::kF32);
    const int w = ref.new_input({4096, 6144}, DType::kF32);
    const int y = ref.matmul(ref.binary(OpKind::kMul, ref.rms_norm(x, kEps), g), w);
    ref.mark_output(y);
    const std::vector<ExprId> exprs = abstract_expressions(ref, *pool_);
    target_expr_ = exprs[y];
    target_ = new SaturatedTarget(saturate_target(*pool_, {target_expr_}));
    std::printf("target %s\nsaturation: %s\n", pool_->to_string(target_expr_).c_str(),
                target_->report.to_string().c_str());
  }
  static void TearDownTestSuite() {
    delete target_;
    delete pool_;
  }

  // The paper's block graph: grid 96 over W's columns, 32 iterations over k. `body` may
  // replace ops to make a wrong variant; it returns the tensor to store.
  using Body = std::function<int(BlockGraph&, int x, int g, int w)>;
  static KernelGraph fused(const Body& body, std::shared_ptr<BlockGraph>* keep = nullptr) {
    auto bg = std::make_shared<BlockGraph>(Dim3{96, 1, 1}, 32);
    const int x = bg->new_input({8, 4096}, DType::kF32, {-1, -1, -1}, 1);
    const int g = bg->new_input({4096}, DType::kF32, {-1, -1, -1}, 0);
    const int w = bg->new_input({4096, 6144}, DType::kF32, {1, -1, -1}, 0);
    bg->new_output(body(*bg, x, g, w), {1, -1, -1}, DType::kF32);
    KernelGraph k;
    const int kx = k.new_input({8, 4096}, DType::kF32);
    const int kg = k.new_input({4096}, DType::kF32);
    const int kw = k.new_input({4096, 6144}, DType::kF32);
    k.mark_output(k.customized({kx, kg, kw}, bg)[0]);
    if (keep) *keep = bg;
    return k;
  }
  static int rms_of(BlockGraph& b, int mean_square) {
    return b.unary(OpKind::kSqrt, b.unary(OpKind::kAddScalar, mean_square, kEps));
  }
  static int paper_body(BlockGraph& b, int x, int g, int w) {
    const int acc = b.accum(OpKind::kAccumSum, b.matmul(b.binary(OpKind::kMul, x, g), w));
    const int ms = b.accum(OpKind::kAccumMeanLast, b.unary(OpKind::kSquare, x));
    return b.binary(OpKind::kDiv, acc, rms_of(b, ms));
  }

  // Expressions of every block tensor and every kernel tensor of a one-kernel graph.
  static std::vector<ExprId> all_expressions(const KernelGraph& k) {
    std::vector<ExprId> out = abstract_expressions(k, *pool_);
    for (const Op& op : k.ops()) {
      if (op.kind != OpKind::kCustomized) continue;
      std::vector<ExprId> inputs;
      for (int t : op.inputs) inputs.push_back(out[t]);
      for (ExprId e : abstract_expressions(*op.block_graph, inputs, *pool_)) out.push_back(e);
    }
    return out;
  }
  // The block tensor `t` of the customized op (after the three inputs).
  static ExprId block_expr(const KernelGraph& k, int t) {
    const Op& op = k.ops().at(3);
    std::vector<ExprId> inputs{pool_->var(0), pool_->var(1), pool_->var(2)};
    return abstract_expressions(*op.block_graph, inputs, *pool_).at(t);
  }

  static bool kept(ExprId e) { return is_subexpression(target_->egraph, *pool_, e); }
  static bool kept_modulo_axioms(ExprId e) {
    return is_subexpression_modulo_axioms(*target_, *pool_, e, SaturationLimits{5000, 0.2, 16});
  }

  static ExprPool* pool_;
  static ExprId target_expr_;
  static SaturatedTarget* target_;
};

ExprPool* RmsNormLinearPruning::pool_ = nullptr;
ExprId RmsNormLinearPruning::target_expr_ = 0;
SaturatedTarget* RmsNormLinearPruning::target_ = nullptr;

TEST_F(RmsNormLinearPruning, TargetSaturatesWithinItsLimits) {
  EXPECT_TRUE(target_->complete()) << target_->report.to_string();
  EXPECT_LT(target_->report.nodes, 20000u);
}

TEST_F(RmsNormLinearPruning, EveryTensorOfThePapersFusedGraphSurvives) {
  std::shared_ptr<BlockGraph> bg;
  const KernelGraph k = fused(paper_body, &bg);
  SubexpressionOracle oracle(target_->egraph);
  const auto started = std::chrono::steady_clock::now();
  for (ExprId e : all_expressions(k)) {
    EXPECT_TRUE(oracle.contains(*pool_, e)) << pool_->to_string(e);
  }
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count();
  std::printf("lookups of all %zu tensors: %.1f us\n", k.tensors().size() + bg->tensors().size(),
              us);
  // The stored output is the reference's output itself, modulo the axioms.
  const ExprId out = abstract_expressions(k, *pool_).at(k.output_ids()[0]);
  const Placement p = oracle.place(*pool_, out);
  ASSERT_EQ(p.kind, Placement::kClass);
  EXPECT_EQ(p.cls, target_->roots[0]);
}

TEST_F(RmsNormLinearPruning, AccumulatingTheWrongCountIsPruned) {
  // The mean divided by half the count: sum(4096, x^2) / 2048.
  int wrong_mean = -1;
  const KernelGraph k = fused([&](BlockGraph& b, int x, int g, int w) {
    const int acc = b.accum(OpKind::kAccumSum, b.matmul(b.binary(OpKind::kMul, x, g), w));
    const int sum_sq = b.accum(OpKind::kAccumSumLast, b.unary(OpKind::kSquare, x));
    wrong_mean = b.unary(OpKind::kMulScalar, sum_sq, 1.0 / 2048);
    return b.binary(OpKind::kDiv, acc, b.unary(OpKind::kSqrt, wrong_mean));
  });
  const ExprId e = block_expr(k, wrong_mean);
  EXPECT_EQ(pool_->to_string(e), "(mul (sum 4096 (mul x0 x0)) 1/2048)");
  EXPECT_FALSE(kept(e));
  EXPECT_FALSE(kept_modulo_axioms(e));
}

TEST_F(RmsNormLinearPruning, AccumulatingOverTheOutputColumnsIsPruned) {
  // One block walks W's columns instead of k: the loop sums 32 different output tiles.
  auto bg = std::make_shared<BlockGraph>(Dim3{1, 1, 1}, 32);
  const int x = bg->new_input({8, 4096}, DType::kF32, {-1, -1, -1}, -1);
  const int g = bg->new_input({4096}, DType::kF32, {-1, -1, -1}, -1);
  const int w = bg->new_input({4096, 6144}, DType::kF32, {-1, -1, -1}, 1);  // tile [4096, 192]
  const int mm = bg->matmul(bg->binary(OpKind::kMul, x, g), w);
  const int acc = bg->accum(OpKind::kAccumSum, mm);
  std::vector<ExprId> e =
      abstract_expressions(*bg, {pool_->var(0), pool_->var(1), pool_->var(2)}, *pool_);
  EXPECT_TRUE(kept(e[mm]));  // each tile's product is fine on its own
  EXPECT_EQ(pool_->to_string(e[acc]), "(sum 131072 (mul (mul x0 x1) x2))");
  EXPECT_FALSE(kept(e[acc]));
  EXPECT_FALSE(kept_modulo_axioms(e[acc]));
}

TEST_F(RmsNormLinearPruning, AnExpWhereThereIsNoneIsPruned) {
  int stray = -1;
  const KernelGraph k = fused([&](BlockGraph& b, int x, int g, int w) {
    stray = b.unary(OpKind::kExp, b.matmul(b.binary(OpKind::kMul, x, g), w));
    const int acc = b.accum(OpKind::kAccumSum, stray);
    const int ms = b.accum(OpKind::kAccumMeanLast, b.unary(OpKind::kSquare, x));
    return b.binary(OpKind::kDiv, acc, rms_of(b, ms));
  });
  EXPECT_FALSE(kept(block_expr(k, stray)));
  EXPECT_FALSE(kept_modulo_axioms(block_expr(k, stray)));
}

TEST_F(RmsNormLinearPruning, AMatmulWithTheWrongOperandIsPruned) {
  int wrong = -1;
  const KernelGraph k = fused([&](BlockGraph& b, int x, int /*g*/, int w) {
    wrong = b.matmul(b.unary(OpKind::kSquare, x), w);  // x*x where x*g belongs
    const int acc = b.accum(OpKind::kAccumSum, wrong);
    const int ms = b.accum(OpKind::kAccumMeanLast, b.unary(OpKind::kSquare, x));
    return b.binary(OpKind::kDiv, acc, rms_of(b, ms));
  });
  EXPECT_EQ(pool_->to_string(block_expr(k, wrong)), "(sum 128 (mul (mul x0 x0) x2))");
  EXPECT_FALSE(kept(block_expr(k, wrong)));
  EXPECT_FALSE(kept_modulo_axioms(block_expr(k, wrong)));
}

TEST_F(RmsNormLinearPruning, DividingByTheMeanSquareWithoutTheRootIsPruned) {
  int out = -1;
  const KernelGraph k = fused([&](BlockGraph& b, int x, int g, int w) {
    const int acc = b.accum(OpKind::kAccumSum, b.matmul(b.binary(OpKind::kMul, x, g), w));
    const int ms = b.accum(OpKind::kAccumMeanLast, b.unary(OpKind::kSquare, x));
    out = b.binary(OpKind::kDiv, acc, b.unary(OpKind::kAddScalar, ms, kEps));
    return out;
  });
  EXPECT_FALSE(kept(block_expr(k, out)));
}

TEST_F(RmsNormLinearPruning, PermissiveFactoringKeepsAMatmulWithoutTheGain) {
  // Documented consequence of the independence assumption (axioms.h): g can be pulled out
  // of the k-sum, so x@w looks like part of (x*g)@w. The verifier rejects such graphs.
  int xw = -1, acc = -1;
  const KernelGraph k = fused([&](BlockGraph& b, int x, int /*g*/, int w) {
    xw = b.matmul(x, w);
    acc = b.accum(OpKind::kAccumSum, xw);
    return acc;
  });
  EXPECT_EQ(pool_->to_string(block_expr(k, xw)), "(sum 128 (mul x0 x2))");
  EXPECT_TRUE(kept(block_expr(k, xw)));
  EXPECT_TRUE(kept(block_expr(k, acc)));
}

}  // namespace
}  // namespace mj::absexpr
