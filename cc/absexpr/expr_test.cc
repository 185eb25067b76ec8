#include "cc/absexpr/expr.h"

#include <gtest/gtest.h>

namespace mj::absexpr {
namespace {

TEST(ExprPool, EqualTermsShareOneId) {
  ExprPool pool;
  const ExprId a = pool.mul(pool.var(0), pool.var(1));
  const ExprId b = pool.mul(pool.var(0), pool.var(1));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, pool.mul(pool.var(1), pool.var(0)));  // no axioms here: order matters
  EXPECT_EQ(pool.size(), 4u);                        // x0, x1, x0*x1, x1*x0
}

TEST(ExprPool, BuildersApplyTheIdentities) {
  ExprPool pool;
  const ExprId x = pool.var(0);
  const ExprId zero = pool.constant(0.0), one = pool.constant(1.0);
  EXPECT_EQ(pool.add(x, zero), x);
  EXPECT_EQ(pool.add(zero, x), x);
  EXPECT_EQ(pool.mul(x, one), x);
  EXPECT_EQ(pool.mul(one, x), x);
  EXPECT_EQ(pool.div(x, one), x);
  EXPECT_EQ(pool.neg(zero), zero);
  EXPECT_EQ(pool.sub(x, zero), x);  // x - max(x), the max being the stabilizer 0
  EXPECT_EQ(pool.sum(1, x), x);
  EXPECT_EQ(pool.sum(32, pool.sum(128, x)), pool.sum(4096, x));
  EXPECT_EQ(pool.to_string(pool.sum(32, pool.sum(128, x))), "(sum 4096 x0)");
  EXPECT_THROW(pool.sum(0, x), std::invalid_argument);
  EXPECT_THROW(pool.unary(ExprOp::kAdd, x), std::invalid_argument);
}

TEST(ExprPool, MakeKeepsTermsExactlyAsWritten) {
  ExprPool pool;
  const ExprId x = pool.var(0);
  const ExprId inner = pool.make(Node::unary(ExprOp::kSum, x, 128));
  const ExprId nested = pool.make(Node::unary(ExprOp::kSum, inner, 32));
  EXPECT_EQ(pool.to_string(nested), "(sum 32 (sum 128 x0))");
  EXPECT_THROW(pool.make(Node::unary(ExprOp::kExp, 99)), std::out_of_range);
}

TEST(ExprPool, TextFormRoundTrips) {
  ExprPool pool;
  const char* texts[] = {
      "(div x0 (sqrt (add (div (sum 4096 (mul x0 x0)) 4096) 9.9999999999999995e-07)))",
      "(concat 64 16 x0 (sum 256 (mul x0 x1)))",
      "(max 8 (neg (exp x2)))",
      "(mul x0 -1/2)",
  };
  for (const char* t : texts) {
    const ExprId e = parse_expr(pool, t);
    EXPECT_EQ(pool.to_string(e), t);
    EXPECT_EQ(parse_expr(pool, pool.to_string(e)), e);
  }
  EXPECT_EQ(parse_expr(pool, "1e-06"), pool.constant(1e-6));
}

TEST(ExprPool, ParseRejectsMalformedText) {
  ExprPool pool;
  for (const char* bad : {"(mul x0)", "(sum x0 x1)", "(frob x0)", "(mul x0 x1", "y", "()",
                          "(sum 2.5 x0)", "(sum 0 x0)", "x0 x1"}) {
    EXPECT_THROW(parse_expr(pool, bad), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace mj::absexpr
