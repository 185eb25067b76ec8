// The op table (ops.def) and what is derived from it: names, predicates, the hash codes that
// key the on-disk caches, and the elementwise formulas over a float domain.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "cc/ir/elementwise.h"
#include "cc/ir/ir_error_matchers_for_test.h"
#include "cc/ir/op_kind.h"

namespace mj::ir {
namespace {

struct Doubles {
  using Value = double;
  double constant(double c) const { return c; }
  double add(double a, double b) const { return a + b; }
  double sub(double a, double b) const { return a - b; }
  double mul(double a, double b) const { return a * b; }
  double div(double a, double b) const { return a / b; }
  double neg(double a) const { return -a; }
  double recip(double a) const { return 1.0 / a; }
  double exp(double a) const { return std::exp(a); }
  double sqrt(double a) const { return std::sqrt(a); }
  double relu(double a) const { return a > 0 ? a : 0; }
  double erf(double a) const { return std::erf(a); }
  double select(double mask, double x, double c) const { return mask != 0 ? x : c; }
};

TEST(OpTable, NamesAreUniqueAndParseBack) {
  std::set<std::string_view> names;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const std::string_view name = op_kind_name(OpKind(k));
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(parse_op_kind(name), OpKind(k)) << name;
  }
  EXPECT_IR_ERROR(parse_op_kind("reshape"), "unknown op 'reshape'");
  EXPECT_EQ(op_kind_name(OpKind(kNumOpKinds)), "invalid_op_kind");
  EXPECT_IR_ERROR(op_info(OpKind(kNumOpKinds)), "invalid op kind");
}

// A kind's position is its code in content hashes, which key the on-disk caches: new ops go
// at the end of ops.def. This list is what the caches were written with.
TEST(OpTable, HashCodesOfExistingOpsNeverMove) {
  const std::vector<std::string> first = {"input",
                                          "output",
                                          "exp",
                                          "square",
                                          "sqrt",
                                          "rsqrt",
                                          "silu",
                                          "gelu",
                                          "relu",
                                          "sigmoid",
                                          "neg",
                                          "recip",
                                          "mul_scalar",
                                          "add_scalar",
                                          "add",
                                          "sub",
                                          "mul",
                                          "div",
                                          "matmul",
                                          "reduce",
                                          "rms_norm",
                                          "concat",
                                          "customized",
                                          "accum_sum",
                                          "accum_sum_last",
                                          "accum_mean_last",
                                          "accum_rms_last",
                                          "accum_max_last",
                                          "accum_exp_sum_last",
                                          "accum_exp_matmul",
                                          "erf",
                                          "erfc",
                                          "select",
                                          "gelu_erf"};
  ASSERT_GE(kNumOpKinds, int(first.size()));
  for (size_t k = 0; k < first.size(); ++k) EXPECT_EQ(op_kind_name(OpKind(k)), first[k]);
}

TEST(OpTable, PredicatesFollowTheClass) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = OpKind(k);
    const OpInfo& info = op_info(kind);
    SCOPED_TRACE(std::string(info.name));
    EXPECT_EQ(is_unary_elementwise(kind), info.cls == OpClass::kUnary);
    EXPECT_EQ(is_binary_elementwise(kind), info.cls == OpClass::kBinary);
    if (is_unary_elementwise(kind)) EXPECT_EQ(info.arity, 1);
    if (is_binary_elementwise(kind)) EXPECT_EQ(info.arity, 2);
    // The cost model counts every elementwise op and every accumulator.
    if (is_elementwise(kind) || info.cls == OpClass::kAccum) EXPECT_GT(info.flops, 0);
    if (is_accumulator(kind)) {
      EXPECT_TRUE(legal_at_block_level(kind));
      EXPECT_FALSE(legal_at_kernel_level(kind));
    }
  }
  EXPECT_TRUE(has_scalar(OpKind::kMulScalar));
  EXPECT_TRUE(has_scalar(OpKind::kAccumRmsLast));
  EXPECT_FALSE(has_scalar(OpKind::kExp));
  EXPECT_TRUE(has_scalar(OpKind::kSelect));
  EXPECT_FALSE(legal_at_block_level(OpKind::kCustomized));
  EXPECT_EQ(op_info(OpKind::kCustomized).arity, -1);
}

TEST(Elementwise, UnaryFormulas) {
  const Doubles d;
  const double x = 0.7;
  auto un = [&](OpKind k, double c = 0.0) { return apply_unary(d, k, c, x); };
  EXPECT_DOUBLE_EQ(un(OpKind::kExp), std::exp(x));
  EXPECT_DOUBLE_EQ(un(OpKind::kSquare), x * x);
  EXPECT_DOUBLE_EQ(un(OpKind::kSqrt), std::sqrt(x));
  EXPECT_DOUBLE_EQ(un(OpKind::kRsqrt), 1 / std::sqrt(x));
  const double sig = 1 / (1 + std::exp(-x));
  EXPECT_DOUBLE_EQ(un(OpKind::kSigmoid), sig);
  EXPECT_DOUBLE_EQ(un(OpKind::kSilu), x * sig);
  EXPECT_NEAR(un(OpKind::kGelu),
              0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))), 1e-15);
  EXPECT_DOUBLE_EQ(un(OpKind::kRelu), x);
  EXPECT_DOUBLE_EQ(un(OpKind::kErf), std::erf(x));
  EXPECT_DOUBLE_EQ(un(OpKind::kErfc), 1 - std::erf(x));  // the generic form
  EXPECT_DOUBLE_EQ(apply_unary(d, OpKind::kRelu, 0.0, -x), 0.0);
  EXPECT_DOUBLE_EQ(un(OpKind::kNeg), -x);
  EXPECT_DOUBLE_EQ(un(OpKind::kRecip), 1 / x);
  EXPECT_DOUBLE_EQ(un(OpKind::kMulScalar, 3.0), 3 * x);
  EXPECT_DOUBLE_EQ(un(OpKind::kAddScalar, 3.0), 3 + x);
  EXPECT_IR_ERROR(un(OpKind::kAdd), "interpret", "add", "not a unary elementwise op");
  EXPECT_IR_ERROR(apply_unary(d, OpKind::kMatmul, 0.0, x, "my codegen"), "my codegen", "matmul");
}

TEST(Elementwise, BinaryFormulas) {
  const Doubles d;
  EXPECT_DOUBLE_EQ(apply_binary(d, OpKind::kAdd, 0.0, 3.0, 4.0), 7.0);
  EXPECT_DOUBLE_EQ(apply_binary(d, OpKind::kSub, 0.0, 3.0, 4.0), -1.0);
  EXPECT_DOUBLE_EQ(apply_binary(d, OpKind::kMul, 0.0, 3.0, 4.0), 12.0);
  EXPECT_DOUBLE_EQ(apply_binary(d, OpKind::kDiv, 0.0, 3.0, 4.0), 0.75);
  // select: x where the mask is nonzero, else the fill; the fill reaches only select
  EXPECT_DOUBLE_EQ(apply_binary(d, OpKind::kSelect, -9.0, 3.0, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(apply_binary(d, OpKind::kSelect, -9.0, std::nan(""), 0.0), -9.0);
  EXPECT_DOUBLE_EQ(apply_binary(d, OpKind::kAdd, -9.0, 3.0, 4.0), 7.0);
  EXPECT_IR_ERROR(apply_binary(d, OpKind::kExp, 0.0, 3.0, 4.0), "exp",
                  "not a binary elementwise op");
  EXPECT_IR_ERROR(apply_binary(d, OpKind::kAccumExpMatmul, 0.0, 3.0, 4.0), "accum_exp_matmul");
}

}  // namespace
}  // namespace mj::ir
