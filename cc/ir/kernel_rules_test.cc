// Every level-independent and kernel-level rule throws IrError naming op, tensor and rule.
#include <gtest/gtest.h>

#include <cmath>

#include "cc/ir/graph.h"
#include "cc/ir/ir_error_matchers_for_test.h"

namespace mj::ir {
namespace {

TEST(KernelRules, RankAndDims) {
  KernelGraph g;
  EXPECT_IR_ERROR(g.new_input({}, DType::kF32), "new_input", "[]", "rank 0", "1..5");
  EXPECT_IR_ERROR(g.new_input({1, 2, 3, 4, 5, 6}, DType::kF32), "new_input", "[1, 2, 3, 4, 5, 6]",
                  "rank 6");
  EXPECT_IR_ERROR(g.new_input({8, 0}, DType::kF32), "new_input", "[8, 0]", "dim 1", ">= 1");
  EXPECT_TRUE(g.ops().empty());  // a failed builder leaves the graph unchanged
}

TEST(KernelRules, UnknownTensorIds) {
  KernelGraph g;
  const int a = g.new_input({4}, DType::kF32);
  EXPECT_IR_ERROR(g.unary(OpKind::kExp, 7), "exp", "unknown tensor t7");
  EXPECT_IR_ERROR(g.binary(OpKind::kAdd, a, -1), "add", "unknown tensor t-1");
  EXPECT_IR_ERROR(g.matmul(3, a), "matmul", "unknown tensor t3");
  EXPECT_IR_ERROR(g.reduce(9, 0, ReduceKind::kSum), "reduce", "t9");
  EXPECT_IR_ERROR(g.rms_norm(9, 1e-6), "rms_norm", "t9");
  EXPECT_IR_ERROR(g.concat(a, 9, 0), "concat", "t9");
  EXPECT_IR_ERROR(g.mark_output(5), "mark_output", "t5");
  EXPECT_IR_ERROR(g.tensor(5), "unknown tensor t5");
}

TEST(KernelRules, UnaryAndBinaryRejectOtherKinds) {
  KernelGraph g;
  const int a = g.new_input({4}, DType::kF32);
  EXPECT_IR_ERROR(g.unary(OpKind::kAdd, a), "unary", "'add'", "not a unary elementwise");
  EXPECT_IR_ERROR(g.unary(OpKind::kMatmul, a), "unary", "'matmul'");
  EXPECT_IR_ERROR(g.binary(OpKind::kExp, a, a), "binary", "'exp'", "not a binary elementwise");
  EXPECT_IR_ERROR(g.binary(OpKind::kAccumSum, a, a), "binary", "'accum_sum'");
}

TEST(KernelRules, BroadcastingFailureNamesBothTensors) {
  KernelGraph g;
  const int a = g.new_input({8, 128}, DType::kF32);
  const int b = g.new_input({8, 64}, DType::kF32);
  EXPECT_IR_ERROR(g.binary(OpKind::kMul, a, b), "mul", "t0 [8, 128]", "t1 [8, 64]", "broadcast",
                  "128 vs 64");
}

TEST(KernelRules, Broadcasting) {
  KernelGraph g;
  const int a = g.new_input({8, 1, 5}, DType::kF32);
  const int b = g.new_input({3, 1}, DType::kBF16);
  const int c = g.binary(OpKind::kSub, a, b);
  EXPECT_EQ(g.tensor(c).shape, (Shape{8, 3, 5}));
  EXPECT_EQ(g.tensor(c).dtype, DType::kF32);  // mixed dtypes compute in float32
  const int d = g.new_input({5}, DType::kBF16);
  EXPECT_EQ(g.tensor(g.binary(OpKind::kAdd, d, d)).dtype, DType::kBF16);
}

TEST(KernelRules, MatmulRules) {
  KernelGraph g;
  const int a = g.new_input({8, 128}, DType::kF32);
  const int b = g.new_input({64, 32}, DType::kF32);
  const int v = g.new_input({128}, DType::kF32);
  EXPECT_IR_ERROR(g.matmul(a, b), "matmul", "inner dims", "t0 [8, 128]", "t1 [64, 32]",
                  "128 vs 64");
  EXPECT_IR_ERROR(g.matmul(a, v), "matmul", "rank >= 2", "t2 [128]");
  const int batched = g.new_input({2, 3, 8, 128}, DType::kF32);
  const int w = g.new_input({3, 128, 16}, DType::kF32);
  EXPECT_EQ(g.tensor(g.matmul(batched, w)).shape, (Shape{2, 3, 8, 16}));
  const int w2 = g.new_input({4, 128, 16}, DType::kF32);
  EXPECT_IR_ERROR(g.matmul(batched, w2), "matmul", "batch dims", "3 vs 4");
  const int w3 = g.new_input({128, 16}, DType::kF32);
  EXPECT_EQ(g.tensor(g.matmul(batched, w3)).shape, (Shape{2, 3, 8, 16}));
}

TEST(KernelRules, ReduceAndConcatDims) {
  KernelGraph g;
  const int a = g.new_input({8, 4096}, DType::kF32);
  EXPECT_IR_ERROR(g.reduce(a, 2, ReduceKind::kSum), "reduce", "dim 2", "out of range",
                  "t0 [8, 4096]");
  EXPECT_IR_ERROR(g.reduce(a, -3, ReduceKind::kMax), "reduce", "dim -3", "out of range");
  const int r = g.reduce(a, -1, ReduceKind::kMean);
  EXPECT_EQ(g.ops()[g.tensor(r).producer].dim, 1);  // normalized
  EXPECT_EQ(g.ops()[g.tensor(r).producer].reduce, ReduceKind::kMean);
  EXPECT_EQ(g.tensor(r).shape, (Shape{8, 1}));

  const int b = g.new_input({8, 16}, DType::kF32);
  const int c = g.concat(a, b, -1);
  EXPECT_EQ(g.tensor(c).shape, (Shape{8, 4112}));
  EXPECT_EQ(g.ops()[g.tensor(c).producer].dim, 1);
  EXPECT_IR_ERROR(g.concat(a, b, 0), "concat", "dim 1 differs", "t0 [8, 4096]", "t2 [8, 16]");
  EXPECT_IR_ERROR(g.concat(a, b, 2), "concat", "dim 2", "out of range");
  const int v = g.new_input({8}, DType::kF32);
  EXPECT_IR_ERROR(g.concat(a, v, 0), "concat", "equal rank");
}

TEST(KernelRules, ScalarsAreKeptOnlyWhereTheyMeanSomething) {
  KernelGraph g;
  const int a = g.new_input({4}, DType::kF32);
  const int e = g.unary(OpKind::kExp, a, 3.0);
  EXPECT_EQ(g.ops()[g.tensor(e).producer].scalar, 0.0);
  const int m = g.unary(OpKind::kMulScalar, a, 0.125);
  EXPECT_EQ(g.ops()[g.tensor(m).producer].scalar, 0.125);
  EXPECT_IR_ERROR(g.unary(OpKind::kAddScalar, a, std::nan("")), "add_scalar", "finite");
  EXPECT_IR_ERROR(g.rms_norm(a, HUGE_VAL), "rms_norm", "eps", "finite");
}

TEST(KernelRules, OutputsKeepTheirOrderAndPositions) {
  KernelGraph g;
  const int a = g.new_input({4}, DType::kF32);
  const int b = g.new_input({4}, DType::kF16);
  g.mark_output(b);
  g.mark_output(a);  // an input may be an output
  EXPECT_EQ(g.output_ids(), (std::vector<int>{b, a}));
  EXPECT_EQ(g.ops()[g.tensor(b).producer].io_index, 1);
  EXPECT_EQ(g.ops()[2].kind, OpKind::kOutput);
  EXPECT_EQ(g.ops()[2].io_index, 0);
  EXPECT_EQ(g.ops()[3].io_index, 1);
  EXPECT_TRUE(g.ops()[3].outputs.empty());
}

TEST(KernelRules, DtypeNames) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_EQ(dtype_bytes(DType::kF32), 4);
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
  EXPECT_IR_ERROR(parse_dtype("float64"), "'float64'");
  EXPECT_EQ(parse_reduce_kind("max"), ReduceKind::kMax);
  EXPECT_IR_ERROR(parse_reduce_kind("prod"), "'prod'");
  for (int k = 0; k <= int(OpKind::kAccumExpMatmul); ++k) {
    EXPECT_EQ(parse_op_kind(op_kind_name(OpKind(k))), OpKind(k));
  }
}

}  // namespace
}  // namespace mj::ir
