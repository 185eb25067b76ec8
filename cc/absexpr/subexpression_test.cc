#include "cc/absexpr/subexpression.h"

#include <gtest/gtest.h>

namespace mj::absexpr {
namespace {

TEST(Subexpression, FormsOfSubtermsAreFoundAndOthersAreNot) {
  ExprPool pool;
  const SaturatedTarget t = saturate_target(pool, {parse_expr(pool, "(mul (add x0 x1) x2)")});
  ASSERT_TRUE(t.complete()) << t.report.to_string();
  ASSERT_EQ(t.roots.size(), 1u);
  auto has = [&](const char* text) {
    return is_subexpression(t.egraph, pool, parse_expr(pool, text));
  };
  EXPECT_TRUE(has("(mul (add x0 x1) x2)"));
  EXPECT_TRUE(has("(add x1 x0)"));
  EXPECT_TRUE(has("(mul x2 x0)"));  // from x0*x2 + x1*x2
  EXPECT_TRUE(has("(add (mul x2 x1) (mul x0 x2))"));
  EXPECT_TRUE(has("x2"));
  EXPECT_FALSE(has("(mul x0 x1)"));
  EXPECT_FALSE(has("(exp x0)"));
  EXPECT_FALSE(has("x3"));
  EXPECT_FALSE(has("(mul (add x0 x1) (add x0 x1))"));
}

TEST(Subexpression, ConstantsAndConcatsOfFoundPartsNeedNoClass) {
  ExprPool pool;
  const SaturatedTarget t = saturate_target(pool, {parse_expr(pool, "(sum 8 (exp x0))")});
  auto has = [&](const char* text) {
    return is_subexpression(t.egraph, pool, parse_expr(pool, text));
  };
  EXPECT_TRUE(has("0"));  // e.g. a softmax max, the stabilizer
  EXPECT_TRUE(has("(concat 4 4 (exp x0) (sum 4 (exp x0)))"));
  EXPECT_FALSE(has("(concat 4 4 (exp x0) x1)"));
  EXPECT_FALSE(has("(exp (concat 4 4 x0 x0))"));  // nothing is built on a classless term
  EXPECT_FALSE(has("(mul (exp x0) 3)"));
  EXPECT_TRUE(has("(sum 2 (sum 4 (exp x0)))"));  // partial sums of a tile loop
  EXPECT_FALSE(has("(sum 16 (exp x0))"));
}

TEST(Subexpression, PartialSumsOfTheTargetsSumsAreFound) {
  ExprPool pool;
  // rms(x) * g @ w with x0 = x, x1 = g, x2 = w, over k = 64.
  const SaturatedTarget t = saturate_target(
      pool, {parse_expr(pool, "(sum 64 (mul (mul (div x0 (sqrt (sum 64 (mul x0 x0)))) x1) x2))")});
  ASSERT_TRUE(t.complete()) << t.report.to_string();
  auto place = [&](const char* text) {
    SubexpressionOracle oracle(t.egraph);
    return oracle.place(pool, parse_expr(pool, text));
  };
  const Placement tile = place("(sum 16 (mul (mul x0 x1) x2))");
  EXPECT_EQ(tile.kind, Placement::kPartialSum);
  EXPECT_EQ(tile.count, 16);
  EXPECT_EQ(place("(sum 16 (mul x0 x0))").kind, Placement::kPartialSum);
  EXPECT_FALSE(place("(sum 24 (mul x0 x0))").found());   // 24 does not divide 64
  EXPECT_FALSE(place("(sum 128 (mul x0 x0))").found());  // more than the whole row
  // Accumulating tiles gives a larger partial sum, then the whole sum.
  EXPECT_EQ(place("(sum 2 (sum 16 (mul (mul x0 x1) x2)))").kind, Placement::kPartialSum);
  EXPECT_EQ(place("(sum 4 (sum 16 (mul (mul x0 x1) x2)))").kind, Placement::kClass);
  // Operators applied to a tile's sum move into it: dividing each tile by the rms and then
  // accumulating is the target itself.
  const char* per_tile = "(div (sum 16 (mul (mul x0 x1) x2)) (sqrt (sum 64 (mul x0 x0))))";
  EXPECT_EQ(place(per_tile).kind, Placement::kPartialSum);
  const Placement whole =
      place("(sum 4 (div (sum 16 (mul (mul x0 x1) x2)) (sqrt (sum 64 (mul x0 x0)))))");
  ASSERT_EQ(whole.kind, Placement::kClass);
  EXPECT_EQ(whole.cls, t.roots[0]);
  EXPECT_EQ(place("(mul x1 (sum 16 (mul x0 x2)))").kind, Placement::kPartialSum);
  EXPECT_EQ(place("(neg (sum 16 (mul x0 x0)))").kind, Placement::kAbsent);  // no -x*x in it
  EXPECT_FALSE(place("(exp (sum 16 (mul x0 x0)))").found());
  EXPECT_FALSE(place("(div x1 (sum 16 (mul x0 x0)))").found());
  EXPECT_FALSE(place("(add (sum 16 (mul x0 x0)) x1)").found());
}

TEST(Subexpression, SumsOfPartialSumsOverTheSameCountAreFound) {
  ExprPool pool;
  const SaturatedTarget t = saturate_target(pool, {parse_expr(pool, "(sum 64 (add x0 (neg x1)))")});
  SubexpressionOracle oracle(t.egraph);
  const ExprId parts = parse_expr(pool, "(add (sum 8 x0) (neg (sum 8 x1)))");
  EXPECT_EQ(oracle.place(pool, parts).kind, Placement::kPartialSum);
  EXPECT_FALSE(oracle.contains(pool, parse_expr(pool, "(add (sum 8 x0) (neg (sum 4 x1)))")));
}

TEST(Subexpression, OracleMemoizesAndAgreesWithTheOneShotQuery) {
  ExprPool pool;
  const SaturatedTarget t =
      saturate_target(pool, {parse_expr(pool, "(div (sum 16 (mul x0 x1)) (sqrt x2))")});
  SubexpressionOracle oracle(t.egraph);
  const char* texts[] = {"(sum 4 (mul x1 x0))",
                         "(sum 4 (sum 4 (mul x0 x1)))",
                         "(div (sum 16 (mul x0 x1)) (sqrt x2))",
                         "(sum 4 (mul x1 x1))",
                         "(sqrt x2)",
                         "(sum 16 (div (mul x0 x1) (sqrt x2)))",
                         "(sqrt x1)"};
  for (const char* text : texts) {
    const ExprId e = parse_expr(pool, text);
    EXPECT_EQ(oracle.contains(pool, e), is_subexpression(t.egraph, pool, e)) << text;
    EXPECT_EQ(oracle.contains(pool, e), oracle.contains(pool, e)) << text;
  }
  const Placement root = oracle.place(pool, parse_expr(pool, texts[2]));
  ASSERT_EQ(root.kind, Placement::kClass);
  EXPECT_EQ(root.cls, t.roots[0]);
  ExprPool other;
  EXPECT_THROW(oracle.contains(other, other.var(0)), std::logic_error);
}

TEST(Subexpression, LocalRewritingRecoversFormsAnIncompleteTargetLacks) {
  ExprPool pool;
  SaturationLimits none;
  none.max_iterations = 0;  // the target stays exactly as written
  const SaturatedTarget t =
      saturate_target(pool, {parse_expr(pool, "(mul x0 (mul x1 (mul x2 x3)))")}, none);
  EXPECT_FALSE(t.complete());
  const ExprId regrouped = parse_expr(pool, "(mul (mul x1 x2) x3)");
  EXPECT_FALSE(is_subexpression(t.egraph, pool, regrouped));
  const SaturationLimits local{2000, 0.05, 8};
  EXPECT_TRUE(is_subexpression_modulo_axioms(t, pool, regrouped, local));
  EXPECT_FALSE(
      is_subexpression_modulo_axioms(t, pool, parse_expr(pool, "(mul (mul x1 x2) x1)"), local));
}

}  // namespace
}  // namespace mj::absexpr
