#include "cc/absexpr/runner.h"

#include <gtest/gtest.h>

#include "cc/absexpr/axioms.h"

namespace mj::absexpr {
namespace {

// A product of n distinct inputs: under associativity and commutativity its e-graph grows
// like 3^n, so it saturates for small n and hits any limit for large n.
std::string product_of(int n) {
  std::string s = "x0";
  for (int i = 1; i < n; ++i) s = "(mul " + s + " x" + std::to_string(i) + ")";
  return s;
}

std::vector<Rewrite> ac_rules() {
  std::vector<Rewrite> rules;
  rules.emplace_back("mul-comm", "(mul ?a ?b)", "(mul ?b ?a)");
  rules.emplace_back("mul-assoc", "(mul ?a (mul ?b ?c))", "(mul (mul ?a ?b) ?c)");
  return rules;
}

// The runner's result must not depend on its incremental matching: a plain loop that
// searches every class every time is the reference.
void naive_saturate(EGraph& g, const std::vector<Rewrite>& rules) {
  g.rebuild();
  for (;;) {
    const uint64_t before = g.version();
    std::vector<std::vector<Match>> matches;
    for (const Rewrite& r : rules) matches.push_back(r.search(g));
    for (size_t r = 0; r < rules.size(); ++r) {
      for (const Match& m : matches[r]) rules[r].apply(g, m);
    }
    g.rebuild();
    if (g.version() == before) return;
  }
}

TEST(Runner, SaturatesSmallGraphsToTheSameResultAsNaiveMatching) {
  ExprPool pool;
  const ExprId e = parse_expr(pool, product_of(4));
  EGraph g, reference;
  g.add_expr(pool, e);
  reference.add_expr(pool, e);
  const SaturationReport report = saturate(g, ac_rules());
  naive_saturate(reference, ac_rules());
  EXPECT_EQ(report.stop, StopReason::kSaturated) << report.to_string();
  EXPECT_TRUE(report.saturated());
  EXPECT_EQ(g.num_classes(), 15u);  // one per nonempty subset of {x0, x1, x2, x3}
  EXPECT_EQ(g.num_classes(), reference.num_classes());
  EXPECT_EQ(g.num_nodes(), reference.num_nodes());
  EXPECT_TRUE(g.is_clean());

  // Saturated means a further run changes nothing.
  const uint64_t version = g.version();
  EXPECT_EQ(saturate(g, ac_rules()).stop, StopReason::kSaturated);
  EXPECT_EQ(g.version(), version);
}

TEST(Runner, IncrementalMatchingAgreesWithNaiveOnTheFullAxioms) {
  ExprPool pool;
  const ExprId e = parse_expr(pool, "(sum 12 (mul (div (add x0 x1) (sqrt x2)) x3))");
  EGraph g, reference;
  g.add_expr(pool, e);
  reference.add_expr(pool, e);
  SaturationLimits unlimited;
  unlimited.rule_match_limit = 0;
  const SaturationReport report = saturate(g, abstract_expression_axioms(), unlimited);
  ASSERT_TRUE(report.saturated()) << report.to_string();
  naive_saturate(reference, abstract_expression_axioms());
  EXPECT_EQ(g.num_classes(), reference.num_classes());
  EXPECT_EQ(g.num_nodes(), reference.num_nodes());
}

TEST(Runner, StopsAtTheNodeLimitWithACleanGraph) {
  ExprPool pool;
  EGraph g;
  g.add_expr(pool, parse_expr(pool, product_of(10)));
  SaturationLimits limits;
  limits.max_nodes = 500;
  const SaturationReport report = saturate(g, ac_rules(), limits);
  EXPECT_EQ(report.stop, StopReason::kNodeLimit) << report.to_string();
  EXPECT_GT(report.nodes, 500u);
  EXPECT_LT(report.nodes, 500u + 64u * 4u);  // checked every 64 applications, <= 4 nodes each
  EXPECT_TRUE(g.is_clean());
  EXPECT_EQ(report.nodes, g.num_nodes());
}

TEST(Runner, StopsAtTheTimeLimit) {
  ExprPool pool;
  EGraph g;
  g.add_expr(pool, parse_expr(pool, product_of(12)));
  SaturationLimits limits;
  limits.max_nodes = size_t(1) << 30;
  limits.max_seconds = 0.02;
  const SaturationReport report = saturate(g, ac_rules(), limits);
  EXPECT_EQ(report.stop, StopReason::kTimeLimit) << report.to_string();
  EXPECT_LT(report.seconds, 1.0);  // stopped promptly, not after the iteration's work
  EXPECT_TRUE(g.is_clean());
  std::printf("time-limited run: %s\n", report.to_string().c_str());
}

TEST(Runner, StopsAtTheIterationLimit) {
  ExprPool pool;
  EGraph g;
  g.add_expr(pool, parse_expr(pool, product_of(6)));
  SaturationLimits limits;
  limits.max_iterations = 2;
  const SaturationReport report = saturate(g, ac_rules(), limits);
  EXPECT_EQ(report.stop, StopReason::kIterationLimit);
  EXPECT_EQ(report.iterations, 2);
}

TEST(Runner, BackoffDelaysGreedyRulesButReachesTheSameSaturation) {
  ExprPool pool;
  EGraph banned, free_running;
  banned.add_expr(pool, parse_expr(pool, product_of(5)));
  free_running.add_expr(pool, parse_expr(pool, product_of(5)));
  SaturationLimits tight;
  tight.rule_match_limit = 8;
  SaturationLimits off;
  off.rule_match_limit = 0;
  const SaturationReport a = saturate(banned, ac_rules(), tight);
  const SaturationReport b = saturate(free_running, ac_rules(), off);
  ASSERT_TRUE(a.saturated()) << a.to_string();
  ASSERT_TRUE(b.saturated()) << b.to_string();
  EXPECT_GT(a.iterations, b.iterations);
  EXPECT_EQ(banned.num_classes(), 31u);
  EXPECT_EQ(banned.num_nodes(), free_running.num_nodes());
}

}  // namespace
}  // namespace mj::absexpr
