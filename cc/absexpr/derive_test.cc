#include "cc/absexpr/derive.h"

#include <gtest/gtest.h>

#include <memory>

namespace mj::absexpr {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::Op;
using ir::op_kind_name;
using ir::OpKind;
using ir::ReduceKind;

namespace {

class DeriveKernel : public ::testing::Test {
 protected:
  std::string expr(int t) {
    exprs_ = abstract_expressions(g_, pool_, options_);
    return pool_.to_string(exprs_.at(t));
  }
  KernelGraph g_;
  ExprPool pool_;
  DeriveOptions options_;
  std::vector<ExprId> exprs_;
};

TEST_F(DeriveKernel, InputsAreVariablesByPosition) {
  const int a = g_.new_input({4, 8}, DType::kF32);
  const int b = g_.new_input({8, 6}, DType::kBF16);
  EXPECT_EQ(expr(a), "x0");
  EXPECT_EQ(expr(b), "x1");
}

TEST_F(DeriveKernel, UnaryOps) {
  const int x = g_.new_input({4, 8}, DType::kF32);
  const std::pair<OpKind, const char*> cases[] = {
      {OpKind::kExp, "(exp x0)"},   {OpKind::kSquare, "(mul x0 x0)"},
      {OpKind::kSqrt, "(sqrt x0)"}, {OpKind::kRsqrt, "(div 1 (sqrt x0))"},
      {OpKind::kSilu, "(silu x0)"}, {OpKind::kGelu, "(gelu x0)"},
      {OpKind::kRelu, "(relu x0)"}, {OpKind::kSigmoid, "(sigmoid x0)"},
      {OpKind::kNeg, "(neg x0)"},   {OpKind::kRecip, "(div 1 x0)"},
  };
  for (const auto& [kind, want] : cases) EXPECT_EQ(expr(g_.unary(kind, x)), want) << want;
  EXPECT_EQ(expr(g_.unary(OpKind::kMulScalar, x, 0.5)), "(mul x0 1/2)");
  EXPECT_EQ(expr(g_.unary(OpKind::kAddScalar, x, 1e-6)), "(add x0 9.9999999999999995e-07)");
}

TEST_F(DeriveKernel, BinaryOpsIgnoreBroadcasting) {
  const int x = g_.new_input({4, 8}, DType::kF32);
  const int y = g_.new_input({8}, DType::kF32);
  EXPECT_EQ(expr(g_.binary(OpKind::kAdd, x, y)), "(add x0 x1)");
  EXPECT_EQ(expr(g_.binary(OpKind::kSub, x, y)), "(add x0 (neg x1))");
  EXPECT_EQ(expr(g_.binary(OpKind::kMul, y, x)), "(mul x1 x0)");
  EXPECT_EQ(expr(g_.binary(OpKind::kDiv, x, y)), "(div x0 x1)");
}

TEST_F(DeriveKernel, MatmulIsASumOverK) {
  const int a = g_.new_input({2, 4, 8}, DType::kF32);
  const int b = g_.new_input({8, 6}, DType::kF32);
  EXPECT_EQ(expr(g_.matmul(a, b)), "(sum 8 (mul x0 x1))");
}

TEST_F(DeriveKernel, ReductionsCountTheReducedDim) {
  const int x = g_.new_input({4, 8}, DType::kF32);
  EXPECT_EQ(expr(g_.reduce(x, 1, ReduceKind::kSum)), "(sum 8 x0)");
  EXPECT_EQ(expr(g_.reduce(x, 0, ReduceKind::kMean)), "(div (sum 4 x0) 4)");
  EXPECT_EQ(expr(g_.reduce(x, -1, ReduceKind::kMax)), "0");  // a softmax stabilizer
  const int one = g_.reduce(g_.reduce(x, 1, ReduceKind::kSum), 1, ReduceKind::kMean);
  EXPECT_EQ(expr(one), "(sum 8 x0)");  // over a dim of size 1: nothing to sum or divide
  EXPECT_EQ(expr(g_.rms_norm(x, 0.5)), "(div x0 (sqrt (add (div (sum 8 (mul x0 x0)) 8) 1/2)))");
}

TEST_F(DeriveKernel, MaxIsTheStabilizerUnlessToldOtherwise) {
  const int x = g_.new_input({4, 8}, DType::kF32);
  const int m = g_.reduce(x, 1, ReduceKind::kMax);
  const int e = g_.unary(OpKind::kExp, g_.binary(OpKind::kSub, x, m));
  const int soft = g_.binary(OpKind::kDiv, e, g_.reduce(e, 1, ReduceKind::kSum));
  EXPECT_EQ(expr(soft), "(div (exp x0) (sum 8 (exp x0)))");
  options_.max_is_stabilizer = false;
  EXPECT_EQ(expr(m), "(max 8 x0)");
  EXPECT_EQ(expr(e), "(exp (add x0 (neg (max 8 x0))))");
}

TEST_F(DeriveKernel, MatmulOfConcatsAlongKIsASumOfMatmuls) {
  const int x = g_.new_input({16, 256}, DType::kF32);
  const int w = g_.new_input({256, 64}, DType::kF32);
  const int a = g_.new_input({256, 16}, DType::kF32);
  const int b = g_.new_input({16, 64}, DType::kF32);
  const int xa = g_.matmul(x, a);
  const int left = g_.concat(x, xa, 1);
  const int right = g_.concat(w, b, 0);
  EXPECT_EQ(expr(left), "(concat 256 16 x0 (sum 256 (mul x0 x2)))");
  EXPECT_EQ(expr(g_.matmul(left, right)),
            "(add (sum 256 (mul x0 x1)) (sum 16 (mul (sum 256 (mul x0 x2)) x3)))");
  // Concatenated along another dim, the k-sum runs over the concat term itself.
  const int rows = g_.concat(x, x, 0);
  EXPECT_EQ(expr(g_.matmul(rows, w)), "(sum 256 (mul (concat 16 16 x0 x0) x1))");
}

TEST(DeriveBlock, TilesAreTheirKernelTensorsAndAccumulatorsSumOverIterations) {
  BlockGraph bg(Dim3{2, 1, 1}, 4);
  const int s = bg.new_input({8, 64}, DType::kF32, {0, -1, -1}, 1);    // tile [4, 16]
  const int v = bg.new_input({64, 32}, DType::kF32, {-1, -1, -1}, 0);  // tile [16, 32]
  ExprPool pool;
  const std::vector<ExprId> kernel_inputs{pool.var(5), pool.var(6)};
  const int acc = bg.accum(OpKind::kAccumSum, s);
  const int sum_last = bg.accum(OpKind::kAccumSumLast, s);
  const int mean_last = bg.accum(OpKind::kAccumMeanLast, s);
  const int rms_last = bg.accum(OpKind::kAccumRmsLast, s, 0.25);
  const int max_last = bg.accum(OpKind::kAccumMaxLast, s);
  const int exp_sum = bg.accum(OpKind::kAccumExpSumLast, s);
  const int exp_mm = bg.accum_exp_matmul(s, v);
  const int mm = bg.matmul(s, v);
  const std::vector<ExprId> e = abstract_expressions(bg, kernel_inputs, pool);
  auto str = [&](int t) { return pool.to_string(e.at(t)); };
  EXPECT_EQ(str(s), "x5");
  EXPECT_EQ(str(v), "x6");
  EXPECT_EQ(str(acc), "(sum 4 x5)");
  EXPECT_EQ(str(sum_last), "(sum 64 x5)");  // F * last = 4 * 16
  EXPECT_EQ(str(mean_last), "(div (sum 64 x5) 64)");
  EXPECT_EQ(str(rms_last), "(sqrt (add (div (sum 64 (mul x5 x5)) 64) 1/4))");
  EXPECT_EQ(str(max_last), "0");
  EXPECT_EQ(str(exp_sum), "(sum 64 (exp x5))");
  EXPECT_EQ(str(exp_mm), "(sum 64 (mul (exp x5) x6))");
  EXPECT_EQ(str(mm), "(sum 16 (mul x5 x6))");  // a tile's k, not the kernel's

  DeriveOptions keep_max;
  keep_max.max_is_stabilizer = false;
  const std::vector<ExprId> k = abstract_expressions(bg, kernel_inputs, pool, keep_max);
  EXPECT_EQ(pool.to_string(k.at(exp_sum)), "(sum 64 (exp (add x5 (neg (max 64 x5)))))");
  EXPECT_THROW(abstract_expressions(bg, {pool.var(0)}, pool), std::invalid_argument);
}

TEST(DeriveBlock, CustomizedOutputsAreTheBlockOutputsExpressions) {
  auto bg = std::make_shared<BlockGraph>(Dim3{4, 1, 1}, 2);
  const int a = bg->new_input({8, 32}, DType::kF32, {-1, -1, -1}, 1);  // tile [8, 16]
  const int b = bg->new_input({32, 16}, DType::kF32, {1, -1, -1}, 0);  // tile [16, 4]
  const int acc = bg->accum(OpKind::kAccumSum, bg->matmul(a, b));
  bg->new_output(bg->unary(OpKind::kSilu, acc), {1, -1, -1}, DType::kF32);
  bg->new_output(acc, {1, -1, -1}, DType::kF32);
  KernelGraph g;
  const int x = g.new_input({8, 32}, DType::kF32);
  const int w = g.new_input({32, 16}, DType::kF32);
  const int xe = g.unary(OpKind::kExp, x);
  const std::vector<int> outs = g.customized({xe, w}, bg);
  const int after = g.binary(OpKind::kMul, outs[0], outs[1]);
  ExprPool pool;
  const std::vector<ExprId> e = abstract_expressions(g, pool);
  EXPECT_EQ(pool.to_string(e.at(outs[0])), "(silu (sum 32 (mul (exp x0) x1)))");
  EXPECT_EQ(pool.to_string(e.at(outs[1])), "(sum 32 (mul (exp x0) x1))");
  EXPECT_EQ(pool.to_string(e.at(after)),
            "(mul (silu (sum 32 (mul (exp x0) x1))) (sum 32 (mul (exp x0) x1)))");
}

TEST(DeriveIncremental, ExtendingAPrefixEqualsDerivingTheWhole) {
  KernelGraph g;
  const int x = g.new_input({4, 8}, DType::kF32);
  const int w = g.new_input({8, 8}, DType::kF32);
  const int y = g.matmul(x, w);
  ExprPool pool;
  std::vector<ExprId> exprs;
  extend_abstract_expressions(g, pool, exprs);
  ASSERT_EQ(exprs.size(), 3u);
  const int z = g.unary(OpKind::kExp, y);
  const int r = g.reduce(z, 1, ReduceKind::kSum);
  extend_abstract_expressions(g, pool, exprs);
  EXPECT_EQ(exprs, abstract_expressions(g, pool));
  EXPECT_EQ(pool.to_string(exprs.at(r)), "(sum 8 (exp (sum 8 (mul x0 x1))))");
}

TEST(DeriveIncremental, OneOpAtATimeAgreesWithTheWholeGraph) {
  BlockGraph bg(Dim3{2, 1, 1}, 4);
  const int x = bg.new_input({8, 64}, DType::kF32, {-1, -1, -1}, 1);
  const int w = bg.new_input({64, 32}, DType::kF32, {1, -1, -1}, 0);
  const int xw = bg.matmul(bg.unary(OpKind::kSilu, x), w);
  bg.accum(OpKind::kAccumSum, xw);
  bg.accum(OpKind::kAccumRmsLast, x, 1e-5);
  bg.concat(x, x, 1);
  ExprPool pool;
  const std::vector<ExprId> inputs{pool.var(0), pool.var(1)};
  const std::vector<ExprId> whole = abstract_expressions(bg, inputs, pool);
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kInput || op.kind == OpKind::kOutput) continue;
    EXPECT_EQ(abstract_expression_of_op(bg, op, whole, bg.forloop_range(), pool),
              whole.at(op.outputs[0]))
        << op_kind_name(op.kind);
  }
  EXPECT_THROW(abstract_expression_of_op(bg, bg.ops()[0], whole, 4, pool), std::invalid_argument);
  EXPECT_THROW(abstract_expression_of_op(bg, bg.ops().back(), {}, 4, pool), std::invalid_argument);
}

}  // namespace
}  // namespace mj::absexpr
