// Degree bounds of the Schwartz-Zippel argument (verify.cc), checked on small graphs whose
// degrees are known by hand.
#include "cc/verify/false_accept_bound.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mj::verify {

using ir::DType;
using ir::KernelGraph;
using ir::OpKind;
using ir::ReduceKind;

namespace {

KernelGraph binary_of_inputs(OpKind kind, bool swap) {
  KernelGraph g;
  const int a = g.new_input({2, 2}, DType::kF32);
  const int b = g.new_input({2, 2}, DType::kF32);
  g.mark_output(swap ? g.binary(kind, b, a) : g.binary(kind, a, b));
  return g;
}

TEST(FalseAcceptBound, ProductOfTwoInputsHasDegreeTwo) {
  const DegreeBound d =
      degree_bound(binary_of_inputs(OpKind::kMul, false), binary_of_inputs(OpKind::kMul, true));
  EXPECT_EQ(d.output, 2);
  EXPECT_FALSE(d.has_exp);
  EXPECT_EQ(d.exp_args, 0);
}

TEST(FalseAcceptBound, QuotientsCrossMultiply) {
  // a/b - b/a = (a^2 - b^2) / (ab): numerator degree 2
  const DegreeBound d =
      degree_bound(binary_of_inputs(OpKind::kDiv, false), binary_of_inputs(OpKind::kDiv, true));
  EXPECT_EQ(d.output, 2);
}

TEST(FalseAcceptBound, MatmulSumsKeepTheDegreeOfTheirTerms) {
  KernelGraph g;
  const int a = g.new_input({1, 16}, DType::kF32);
  const int b = g.new_input({16, 1}, DType::kF32);
  g.mark_output(g.matmul(a, b));
  EXPECT_EQ(degree_bound(g, g).output, 2);
}

TEST(FalseAcceptBound, SumsOfQuotientsGrowWithTheirLength) {
  // sum_j x_j / y_j over 4 terms: each (1, 1); the common denominator has degree 4
  KernelGraph g;
  const int x = g.new_input({1, 4}, DType::kF32);
  const int y = g.new_input({1, 4}, DType::kF32);
  g.mark_output(g.reduce(g.binary(OpKind::kDiv, x, y), 1, ReduceKind::kSum));
  EXPECT_EQ(degree_bound(g, g).output, 8);  // num 4 + den 4
}

TEST(FalseAcceptBound, SoftmaxCountsExpAsAnAtomAndItsArgument) {
  KernelGraph g;
  const int x = g.new_input({2, 8}, DType::kF32);
  const int e = g.unary(OpKind::kExp, g.binary(OpKind::kMul, x, x));
  g.mark_output(g.binary(OpKind::kDiv, e, g.reduce(e, -1, ReduceKind::kSum)));
  const DegreeBound d = degree_bound(g, g);
  EXPECT_EQ(d.output, 2);  // (1, 1) against (1, 1)
  EXPECT_TRUE(d.has_exp);
  EXPECT_EQ(d.exp_args, 4);  // two arguments of degree 2
}

TEST(FalseAcceptBound, TrialBoundUsesQWithExpAndPWithout) {
  const FieldParams& f = field_params(0);
  DegreeBound d;
  d.output = 8;
  EXPECT_DOUBLE_EQ(trial_log2_bound(d, f), 3 - std::log2(double(f.p)));
  d.has_exp = true;
  d.exp_args = 8;
  EXPECT_DOUBLE_EQ(trial_log2_bound(d, f), 4 - std::log2(double(f.q)));
  d.output = 1e30;  // vacuous: capped at probability 1
  EXPECT_EQ(trial_log2_bound(d, f), 0);
}

}  // namespace
}  // namespace mj::verify
