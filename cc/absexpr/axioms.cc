#include "cc/absexpr/axioms.h"

#include <memory>

namespace mj {

namespace {

// Count n may appear in the e-graph under the options.
bool count_allowed(const AxiomOptions& o, int64_t n) {
  if (o.sum_count_universe.empty()) return true;
  for (int64_t u : o.sum_count_universe) {
    if (n > 0 && u % n == 0) return true;
  }
  return false;
}

// (op ?a ?b) => the folded constant, when both operands are rational constants.
Rewrite fold_rule(const std::string& name, ExprOp op) {
  const std::string lhs = std::string("(") + op_info(op).name + " ?a ?b)";
  return Rewrite(name, lhs, [op](const PatternVars& vars) -> Applier {
    const int va = vars.class_index("?a"), vb = vars.class_index("?b");
    return [op, va, vb](EGraph& g, const Match& m) {
      auto a = g.rational_constant(m.subst.classes[va]);
      auto b = g.rational_constant(m.subst.classes[vb]);
      if (!a || !b) return false;
      auto folded = op == ExprOp::kAdd ? a->plus(*b) : a->times(*b);
      if (!folded) return false;
      return g.merge(m.cls, g.add(Node::constant(*folded)));
    };
  });
}

}  // namespace

std::vector<int64_t> proper_divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 2; d * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

std::vector<Rewrite> abstract_expression_axioms(const AxiomOptions& options) {
  std::vector<Rewrite> rules;
  auto add_both = [&](const std::string& name, const char* a, const char* b) {
    for (Rewrite& r : both_ways(name, a, b)) rules.push_back(std::move(r));
  };
  const auto opts = std::make_shared<const AxiomOptions>(options);

  // Commutativity needs one direction only: the rule is its own inverse.
  rules.emplace_back("add-comm", "(add ?a ?b)", "(add ?b ?a)");
  rules.emplace_back("mul-comm", "(mul ?a ?b)", "(mul ?b ?a)");
  add_both("add-assoc", "(add ?a (add ?b ?c))", "(add (add ?a ?b) ?c)");
  add_both("mul-assoc", "(mul ?a (mul ?b ?c))", "(mul (mul ?a ?b) ?c)");
  add_both("distribute", "(mul ?a (add ?b ?c))", "(add (mul ?a ?b) (mul ?a ?c))");
  add_both("div-mul", "(mul (div ?a ?b) ?c)", "(div (mul ?a ?c) ?b)");
  add_both("div-div", "(div (div ?a ?b) ?c)", "(div ?a (mul ?b ?c))");
  add_both("div-add", "(div (add ?a ?b) ?c)", "(add (div ?a ?c) (div ?b ?c))");
  rules.emplace_back("neg-as-mul", "(neg ?a)", "(mul ?a -1)");
  rules.emplace_back("mul-one", "(mul ?a 1)", "?a");
  rules.emplace_back("add-zero", "(add ?a 0)", "?a");
  rules.emplace_back("div-one", "(div ?a 1)", "?a");
  rules.push_back(fold_rule("fold-add", ExprOp::kAdd));
  rules.push_back(fold_rule("fold-mul", ExprOp::kMul));
  rules.emplace_back("div-by-constant", "(div ?a ?c)", [](const PatternVars& vars) -> Applier {
    const int va = vars.class_index("?a"), vc = vars.class_index("?c");
    return [va, vc](EGraph& g, const Match& m) {
      auto c = g.rational_constant(m.subst.classes[vc]);
      auto inverse = c ? c->reciprocal() : std::nullopt;
      if (!inverse) return false;
      const ClassId k = g.add(Node::constant(*inverse));
      return g.merge(m.cls, g.add(Node::binary(ExprOp::kMul, m.subst.classes[va], k)));
    };
  });
  add_both("silu", "(silu ?x)", "(mul ?x (sigmoid ?x))");

  rules.emplace_back("sum-merge", "(sum ?n (sum ?m ?e))", [opts](const PatternVars& vars) -> Applier {
    const int vn = vars.payload_index("?n"), vm = vars.payload_index("?m");
    const int ve = vars.class_index("?e");
    return [opts, vn, vm, ve](EGraph& g, const Match& m) {
      int64_t total = 0;
      if (__builtin_mul_overflow(m.subst.payloads[vn], m.subst.payloads[vm], &total)) return false;
      if (!count_allowed(*opts, total)) return false;
      return g.merge(m.cls, g.add(Node::unary(ExprOp::kSum, m.subst.classes[ve], total)));
    };
  });
  rules.emplace_back("sum-split", "(sum ?n ?e)", [opts](const PatternVars& vars) -> Applier {
    const int vn = vars.payload_index("?n"), ve = vars.class_index("?e");
    return [opts, vn, ve](EGraph& g, const Match& m) {
      const int64_t n = m.subst.payloads[vn];
      if (!count_allowed(*opts, n)) return false;
      bool changed = false;
      for (int64_t inner : proper_divisors(n)) {
        const ClassId part = g.add(Node::unary(ExprOp::kSum, m.subst.classes[ve], inner));
        changed |= g.merge(m.cls, g.add(Node::unary(ExprOp::kSum, part, n / inner)));
      }
      return changed;
    };
  });
  add_both("sum-add", "(sum ?n (add ?a ?b))", "(add (sum ?n ?a) (sum ?n ?b))");
  add_both("sum-factor", "(sum ?n (mul ?a ?b))", "(mul (sum ?n ?a) ?b)");
  add_both("sum-divisor", "(sum ?n (div ?a ?b))", "(div (sum ?n ?a) ?b)");
  return rules;
}

}  // namespace mj
