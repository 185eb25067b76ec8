#include "cc/absexpr/axioms.h"

#include <gtest/gtest.h>

#include <map>

#include "cc/absexpr/runner.h"

namespace mj::absexpr {
namespace {

struct Instance {
  const char* from;
  const char* to;
};

// One instance per rule: the rule alone must prove from = to.
const std::map<std::string, Instance>& instances() {
  static const std::map<std::string, Instance> table = {
      {"add-comm", {"(add x0 x1)", "(add x1 x0)"}},
      {"mul-comm", {"(mul x0 x1)", "(mul x1 x0)"}},
      {"add-assoc", {"(add x0 (add x1 x2))", "(add (add x0 x1) x2)"}},
      {"mul-assoc", {"(mul x0 (mul x1 x2))", "(mul (mul x0 x1) x2)"}},
      {"distribute", {"(mul x0 (add x1 x2))", "(add (mul x0 x1) (mul x0 x2))"}},
      {"distribute-rev", {"(add (mul x0 x1) (mul x0 x2))", "(mul x0 (add x1 x2))"}},
      {"div-mul", {"(mul (div x0 x1) x2)", "(div (mul x0 x2) x1)"}},
      {"div-mul-rev", {"(div (mul x0 x2) x1)", "(mul (div x0 x1) x2)"}},
      {"div-div", {"(div (div x0 x1) x2)", "(div x0 (mul x1 x2))"}},
      {"div-div-rev", {"(div x0 (mul x1 x2))", "(div (div x0 x1) x2)"}},
      {"div-add", {"(div (add x0 x1) x2)", "(add (div x0 x2) (div x1 x2))"}},
      {"div-add-rev", {"(add (div x0 x2) (div x1 x2))", "(div (add x0 x1) x2)"}},
      {"neg-as-mul", {"(neg x0)", "(mul x0 -1)"}},
      {"mul-one", {"(mul x0 1)", "x0"}},
      {"add-zero", {"(add x0 0)", "x0"}},
      {"div-one", {"(div x0 1)", "x0"}},
      {"fold-add", {"(add 1/2 1/4)", "3/4"}},
      {"fold-mul", {"(mul 3 1/6)", "1/2"}},
      {"div-by-constant", {"(div x0 4096)", "(mul x0 1/4096)"}},
      {"silu", {"(silu x0)", "(mul x0 (sigmoid x0))"}},
      {"silu-rev", {"(mul x0 (sigmoid x0))", "(silu x0)"}},
      {"sum-merge", {"(sum 32 (sum 128 x0))", "(sum 4096 x0)"}},
      {"sum-add", {"(sum 8 (add x0 x1))", "(add (sum 8 x0) (sum 8 x1))"}},
      {"sum-add-rev", {"(add (sum 8 x0) (sum 8 x1))", "(sum 8 (add x0 x1))"}},
      {"sum-factor", {"(sum 8 (mul x0 x1))", "(mul (sum 8 x0) x1)"}},
      {"sum-factor-rev", {"(mul (sum 8 x0) x1)", "(sum 8 (mul x0 x1))"}},
      {"sum-divisor", {"(sum 8 (div x0 x1))", "(div (sum 8 x0) x1)"}},
      {"sum-divisor-rev", {"(div (sum 8 x0) x1)", "(sum 8 (div x0 x1))"}},
  };
  return table;
}

bool proves(const std::vector<Rewrite>& rules, const char* from, const char* to, int iterations) {
  ExprPool pool;
  EGraph g;
  const ClassId a = g.add_expr(pool, parse_expr(pool, from));
  g.rebuild();
  SaturationLimits limits;
  limits.max_iterations = iterations;
  saturate(g, rules, limits);
  auto b = g.lookup_expr(pool, parse_expr(pool, to));
  return b && g.find(*b) == g.find(a);
}

TEST(Axioms, EachAxiomAloneProvesItsInstance) {
  const std::vector<Rewrite> rules = abstract_expression_axioms();
  for (const Rewrite& r : rules) {
    auto it = instances().find(r.name());
    ASSERT_NE(it, instances().end()) << "no test instance for axiom " << r.name();
    std::vector<Rewrite> only{r};
    EXPECT_FALSE(proves(only, it->second.from, it->second.to, 0)) << r.name();
    EXPECT_TRUE(proves(only, it->second.from, it->second.to, 1)) << r.to_string();
  }
  EXPECT_EQ(rules.size(), instances().size());
}

TEST(Axioms, TogetherTheyProveCompositeIdentities) {
  const std::vector<Rewrite> rules = abstract_expression_axioms();
  // rms_norm(x) * g @ w with the divisor moved out of the k-sum (the fused RMSNorm+Linear).
  EXPECT_TRUE(proves(rules, "(sum 64 (mul (mul (div x0 x3) x1) x2))",
                     "(div (sum 64 (mul (mul x0 x1) x2)) x3)", 16));
  // a - b as a + (-1)*b, distributed; a mean as a multiplication by 1/n.
  EXPECT_TRUE(
      proves(rules, "(mul (add x0 (neg x1)) x2)", "(add (mul x0 x2) (mul (mul x1 x2) -1))", 8));
  EXPECT_TRUE(proves(rules, "(div (sum 4096 x0) 4096)", "(mul (sum 4096 x0) 1/4096)", 4));
}

// Terms that differ as functions of the inputs: no sound rule set may equate any pair.
const std::vector<Instance>& distinct_pairs() {
  static const std::vector<Instance> pairs = {
      {"(sum 64 (mul x0 x1))", "(sum 64 (mul x0 x0))"},
      {"(sum 64 (mul x0 x1))", "(sum 32 (mul x0 x1))"},
      {"(exp (add x0 x1))", "(mul (exp x0) (exp x1))"},  // true, but not an axiom here
      {"(mul x0 1e-06)", "(mul x0 1/1000000)"},
      {"(add 1e-06 1)", "1.000001"},  // opaque: never folded
      {"(mul x0 x1)", "(add x0 x1)"},
      {"(div x0 x1)", "(div x1 x0)"},
      {"(sqrt (add x0 x1))", "(add (sqrt x0) (sqrt x1))"},
      {"(sum 8 (exp x0))", "(exp (sum 8 x0))"},
  };
  return pairs;
}

std::vector<std::string> equated_distinct_pairs(const std::vector<Rewrite>& rules) {
  std::vector<std::string> equated;
  for (const Instance& p : distinct_pairs()) {
    if (proves(rules, p.from, p.to, 16)) equated.push_back(std::string(p.from) + " = " + p.to);
  }
  return equated;
}

TEST(Axioms, TheyDoNotEquateDifferentTerms) {
  EXPECT_EQ(equated_distinct_pairs(abstract_expression_axioms()), std::vector<std::string>{});
}

// The check above is what stands between a wrong axiom and a pruner that lets wrong graphs
// through to the verifier (or, worse, prunes the right ones): each deliberately wrong rule
// added to the real set must make it fail.
TEST(Axioms, ADeliberatelyWrongAxiomIsCaught) {
  const std::vector<std::pair<const char*, const char*>> wrong_rules = {
      {"(mul ?a ?b)", "(add ?a ?b)"},
      {"(div ?a ?b)", "(div ?b ?a)"},
      {"(sqrt (add ?a ?b))", "(add (sqrt ?a) (sqrt ?b))"},
      {"(sum 8 (exp ?a))", "(exp (sum 8 ?a))"},
  };
  for (const auto& [lhs, rhs] : wrong_rules) {
    std::vector<Rewrite> rules = abstract_expression_axioms();
    rules.emplace_back("wrong", lhs, rhs);
    EXPECT_FALSE(equated_distinct_pairs(rules).empty()) << lhs << " => " << rhs;
  }
}

TEST(Axioms, SumCountsStayWithinTheUniverse) {
  AxiomOptions options;
  options.sum_count_universe = {4096};
  const std::vector<Rewrite> bounded = abstract_expression_axioms(options);
  EXPECT_TRUE(proves(bounded, "(sum 32 (sum 128 x0))", "(sum 4096 x0)", 2));
  // 2 * 4096 divides nothing in the universe: the nested form stays nested.
  ExprPool pool;
  EGraph g;
  g.add_expr(pool, parse_expr(pool, "(sum 2 (sum 4096 x0))"));
  saturate(g, bounded);
  EXPECT_FALSE(g.lookup_expr(pool, parse_expr(pool, "(sum 8192 x0)")));
  EXPECT_TRUE(proves(abstract_expression_axioms(), "(sum 2 (sum 4096 x0))", "(sum 8192 x0)", 2));
}

// The strict corners of the approximation (axioms.h), each of which kept a target from
// saturating when it was permissive.
TEST(Axioms, AFactorSharingAnInputWithTheSummandStaysInside) {
  const std::vector<Rewrite> rules = abstract_expression_axioms();
  EXPECT_FALSE(proves(rules, "(sum 8 (mul x0 x0))", "(mul (sum 8 x0) x0)", 8));
  // Moving in is the permissive direction for factors without sums, so the reverse holds.
  EXPECT_TRUE(proves(rules, "(mul (sum 8 x0) x0)", "(sum 8 (mul x0 x0))", 8));
  // The rms divisor has its x under its own sum only, so it leaves the k-sum.
  EXPECT_TRUE(proves(rules, "(sum 8 (div (mul x0 x1) (sqrt (sum 8 (mul x0 x0)))))",
                     "(div (sum 8 (mul x0 x1)) (sqrt (sum 8 (mul x0 x0))))", 8));
}

TEST(Axioms, AFactorContainingASumIsNotMovedIntoAnotherSum) {
  const std::vector<Rewrite> rules = abstract_expression_axioms();
  EXPECT_FALSE(proves(rules, "(mul (sum 8 x0) (sum 4 x1))", "(sum 8 (mul x0 (sum 4 x1)))", 8));
  EXPECT_FALSE(proves(rules, "(div (sum 8 x0) (sum 4 x1))", "(sum 8 (div x0 (sum 4 x1)))", 8));
  EXPECT_TRUE(proves(rules, "(mul (sum 8 x0) x1)", "(sum 8 (mul x0 x1))", 8));
}

TEST(Axioms, ASumIsNotDistributedOverItself) {
  const std::vector<Rewrite> rules = abstract_expression_axioms();
  EXPECT_FALSE(proves(rules, "(mul (add x0 x1) (add x0 x1))",
                      "(add (mul (add x0 x1) x0) (mul (add x0 x1) x1))", 8));
  EXPECT_TRUE(proves(rules, "(mul x2 (add x0 x1))", "(add (mul x2 x0) (mul x2 x1))", 8));
}

}  // namespace
}  // namespace mj::absexpr
