#include "cc/absexpr/pattern.h"

#include <gtest/gtest.h>

#include "cc/absexpr/rewrite.h"

namespace mj::absexpr {
namespace {

TEST(Pattern, MatchesEveryNodeOfAClassAndBindsVariables) {
  ExprPool pool;
  EGraph g;
  const ClassId a = g.add_expr(pool, parse_expr(pool, "(mul x0 x1)"));
  const ClassId b = g.add_expr(pool, parse_expr(pool, "(mul x2 x0)"));
  g.merge(a, b);
  g.rebuild();
  PatternVars vars;
  const Pattern p = Pattern::parse("(mul ?a x0)", vars);
  std::vector<Subst> out;
  p.match(g, a, out);
  ASSERT_EQ(out.size(), 1u);  // only x2 * x0 has x0 on the right
  EXPECT_EQ(out[0].classes[vars.class_index("?a")], *g.lookup(Node::var(2)));

  PatternVars vars2;
  const Pattern q = Pattern::parse("(mul ?a ?b)", vars2);
  out.clear();
  q.match(g, a, out);
  EXPECT_EQ(out.size(), 2u);
}

TEST(Pattern, RepeatedVariablesRequireTheSameClass) {
  ExprPool pool;
  EGraph g;
  const ClassId sq = g.add_expr(pool, parse_expr(pool, "(mul x0 x0)"));
  const ClassId xy = g.add_expr(pool, parse_expr(pool, "(mul x0 x1)"));
  g.rebuild();
  PatternVars vars;
  const Pattern p = Pattern::parse("(mul ?x ?x)", vars);
  std::vector<Subst> out;
  p.match(g, sq, out);
  EXPECT_EQ(out.size(), 1u);
  out.clear();
  p.match(g, xy, out);
  EXPECT_TRUE(out.empty());
  // Merging x1 into x0 makes x0 * x1 a square too.
  g.merge(*g.lookup(Node::var(0)), *g.lookup(Node::var(1)));
  g.rebuild();
  p.match(g, xy, out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(Pattern, PayloadVariablesBindCountsAndFixedPayloadsFilter) {
  ExprPool pool;
  EGraph g;
  const ClassId s = g.add_expr(pool, parse_expr(pool, "(sum 32 (sum 128 x0))"));
  g.rebuild();
  PatternVars vars;
  const Pattern p = Pattern::parse("(sum ?n (sum ?m ?e))", vars);
  std::vector<Subst> out;
  p.match(g, s, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].payloads[vars.payload_index("?n")], 32);
  EXPECT_EQ(out[0].payloads[vars.payload_index("?m")], 128);

  PatternVars fixed_vars;
  out.clear();
  Pattern::parse("(sum 32 ?e)", fixed_vars).match(g, s, out);
  EXPECT_EQ(out.size(), 1u);
  out.clear();
  Pattern::parse("(sum 64 ?e)", fixed_vars).match(g, s, out);
  EXPECT_TRUE(out.empty());
  out.clear();
  PatternVars same;
  Pattern::parse("(sum ?n (sum ?n ?e))", same).match(g, s, out);  // 32 != 128
  EXPECT_TRUE(out.empty());
}

TEST(Pattern, InstantiateBuildsTheRightSide) {
  ExprPool pool;
  EGraph g;
  const ClassId s = g.add_expr(pool, parse_expr(pool, "(sum 32 (mul x0 x1))"));
  g.rebuild();
  PatternVars vars;
  const Pattern lhs = Pattern::parse("(sum ?n (mul ?a ?b))", vars);
  const Pattern rhs = Pattern::parse("(mul (sum ?n ?a) ?b)", vars);
  std::vector<Subst> out;
  lhs.match(g, s, out);
  ASSERT_EQ(out.size(), 1u);
  const ClassId made = rhs.instantiate(g, out[0]);
  EXPECT_EQ(g.lookup_expr(pool, parse_expr(pool, "(mul (sum 32 x0) x1)")), made);
  EXPECT_EQ(rhs.to_string(vars), "(mul (sum ?n ?a) ?b)");
  EXPECT_EQ(lhs.depth(), 3);
}

TEST(Rewrite, SearchFindsMatchesInEveryClassAndApplyMerges) {
  ExprPool pool;
  EGraph g;
  const ClassId e = g.add_expr(pool, parse_expr(pool, "(add (mul x0 x1) (mul x1 x2))"));
  g.rebuild();
  const Rewrite comm("mul-comm", "(mul ?a ?b)", "(mul ?b ?a)");
  const std::vector<Match> matches = comm.search(g);
  EXPECT_EQ(matches.size(), 2u);
  for (const Match& m : matches) EXPECT_TRUE(comm.apply(g, m));
  g.rebuild();
  EXPECT_EQ(g.lookup_expr(pool, parse_expr(pool, "(add (mul x1 x0) (mul x2 x1))")), g.find(e));
  EXPECT_EQ(comm.search(g, 1).size(), 1u);  // the limit
}

TEST(Rewrite, RejectsMalformedRules) {
  EXPECT_THROW(Rewrite("bad", "(mul ?a ?b)", "(mul ?a ?c)"), std::invalid_argument);
  EXPECT_THROW(Rewrite("bad", "?a", "(mul ?a 1)"), std::invalid_argument);
  EXPECT_THROW(Rewrite("bad", "(mul ?a", "?a"), std::invalid_argument);
  EXPECT_THROW(Rewrite("bad",
                       "(add ?a (add ?b (add ?c (add ?d (add ?e (add ?f (add ?g ?h (add ?i "
                       "?j)))))))))",
                       "?a"),
               std::invalid_argument);
  ExprPool pool;
  EGraph g;
  g.add_expr(pool, parse_expr(pool, "(mul x0 x1)"));
  g.merge(0, 1);  // dirty until rebuilt
  EXPECT_THROW(Rewrite("r", "(mul ?a ?b)", "?a").search(g), std::logic_error);
}

}  // namespace
}  // namespace mj::absexpr
