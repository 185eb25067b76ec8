#include "cc/absexpr/axioms.h"

#include <memory>

namespace mj::absexpr {

namespace {

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

// (mul ?a (add ?b ?c)) => (add (mul ?a ?b) (mul ?a ?c)) unless ?a shares an input with the
// sum (axioms.h).
Rewrite distribute_rule() {
  return Rewrite("distribute", "(mul ?a (add ?b ?c))", [](const PatternVars& vars) -> Applier {
    const int va = vars.class_index("?a"), vb = vars.class_index("?b");
    const int vc = vars.class_index("?c");
    return [va, vb, vc](EGraph& g, const Match& m) {
      const ClassId a = m.subst.classes[va], b = m.subst.classes[vb], c = m.subst.classes[vc];
      if (g.free_vars(a) & (g.free_vars(b) | g.free_vars(c))) return false;
      const ClassId ab = g.add(Node::binary(ExprOp::kMul, a, b));
      const ClassId ac = g.add(Node::binary(ExprOp::kMul, a, c));
      return g.merge(m.cls, g.add(Node::binary(ExprOp::kAdd, ab, ac)));
    };
  });
}

// (div ?a ?c) => (mul ?a 1/c) for a rational constant c.
Rewrite div_by_constant_rule() {
  return Rewrite("div-by-constant", "(div ?a ?c)", [](const PatternVars& vars) -> Applier {
    const int va = vars.class_index("?a"), vc = vars.class_index("?c");
    return [va, vc](EGraph& g, const Match& m) {
      auto c = g.rational_constant(m.subst.classes[vc]);
      auto inverse = c ? c->reciprocal() : std::nullopt;
      if (!inverse) return false;
      const ClassId k = g.add(Node::constant(*inverse));
      return g.merge(m.cls, g.add(Node::binary(ExprOp::kMul, m.subst.classes[va], k)));
    };
  });
}

// (sum ?n (sum ?m ?e)) => (sum n*m ?e) within the count universe.
Rewrite sum_merge_rule(std::shared_ptr<const AxiomOptions> opts) {
  return Rewrite("sum-merge", "(sum ?n (sum ?m ?e))", [opts](const PatternVars& vars) -> Applier {
    const int vn = vars.payload_index("?n"), vm = vars.payload_index("?m");
    const int ve = vars.class_index("?e");
    return [opts, vn, vm, ve](EGraph& g, const Match& m) {
      int64_t total = 0;
      if (__builtin_mul_overflow(m.subst.payloads[vn], m.subst.payloads[vm], &total)) return false;
      if (!count_allowed(*opts, total)) return false;
      return g.merge(m.cls, g.add(Node::unary(ExprOp::kSum, m.subst.classes[ve], total)));
    };
  });
}

// (sum ?n (op ?a ?b)) => (op (sum ?n ?a) ?b) for op * or /, unless ?a and ?b share an input.
Rewrite move_out_of_sum(const std::string& name, const char* lhs, ExprOp op) {
  return Rewrite(name, lhs, [op](const PatternVars& vars) -> Applier {
    const int vn = vars.payload_index("?n");
    const int va = vars.class_index("?a"), vb = vars.class_index("?b");
    return [op, vn, va, vb](EGraph& g, const Match& m) {
      const ClassId a = m.subst.classes[va], b = m.subst.classes[vb];
      if (g.free_vars(a) & g.free_vars(b)) return false;
      const ClassId part = g.add(Node::unary(ExprOp::kSum, a, m.subst.payloads[vn]));
      return g.merge(m.cls, g.add(Node::binary(op, part, b)));
    };
  });
}

// (op (sum ?n ?a) ?b) => (sum ?n (op ?a ?b)) for op * or /, unless ?b contains a sum.
Rewrite move_into_sum(const std::string& name, const char* lhs, ExprOp op) {
  return Rewrite(name, lhs, [op](const PatternVars& vars) -> Applier {
    const int vn = vars.payload_index("?n");
    const int va = vars.class_index("?a"), vb = vars.class_index("?b");
    return [op, vn, va, vb](EGraph& g, const Match& m) {
      const ClassId b = m.subst.classes[vb];
      if (g.has_sum(b)) return false;
      const ClassId inner = g.add(Node::binary(op, m.subst.classes[va], b));
      return g.merge(m.cls, g.add(Node::unary(ExprOp::kSum, inner, m.subst.payloads[vn])));
    };
  });
}

}  // namespace

std::vector<Rewrite> abstract_expression_axioms(const AxiomOptions& options) {
  std::vector<Rewrite> rules;
  auto add_both = [&](const std::string& name, const char* a, const char* b) {
    for (Rewrite& r : both_ways(name, a, b)) rules.push_back(std::move(r));
  };

  // Commutativity is its own inverse, and with it one direction of associativity reaches
  // every grouping; the reverse direction only doubled the matches (measured: same
  // iterations to saturate RMSNorm+Linear, 1.6x the time).
  rules.emplace_back("add-comm", "(add ?a ?b)", "(add ?b ?a)");
  rules.emplace_back("mul-comm", "(mul ?a ?b)", "(mul ?b ?a)");
  rules.emplace_back("add-assoc", "(add ?a (add ?b ?c))", "(add (add ?a ?b) ?c)");
  rules.emplace_back("mul-assoc", "(mul ?a (mul ?b ?c))", "(mul (mul ?a ?b) ?c)");
  rules.push_back(distribute_rule());
  rules.emplace_back("distribute-rev", "(add (mul ?a ?b) (mul ?a ?c))", "(mul ?a (add ?b ?c))");
  add_both("div-mul", "(mul (div ?a ?b) ?c)", "(div (mul ?a ?c) ?b)");
  add_both("div-div", "(div (div ?a ?b) ?c)", "(div ?a (mul ?b ?c))");
  add_both("div-add", "(div (add ?a ?b) ?c)", "(add (div ?a ?c) (div ?b ?c))");
  rules.emplace_back("neg-as-mul", "(neg ?a)", "(mul ?a -1)");
  rules.emplace_back("mul-one", "(mul ?a 1)", "?a");
  rules.emplace_back("add-zero", "(add ?a 0)", "?a");
  rules.emplace_back("div-one", "(div ?a 1)", "?a");
  rules.push_back(fold_rule("fold-add", ExprOp::kAdd));
  rules.push_back(fold_rule("fold-mul", ExprOp::kMul));
  rules.push_back(div_by_constant_rule());
  add_both("silu", "(silu ?x)", "(mul ?x (sigmoid ?x))");

  rules.push_back(sum_merge_rule(std::make_shared<const AxiomOptions>(options)));
  add_both("sum-add", "(sum ?n (add ?a ?b))", "(add (sum ?n ?a) (sum ?n ?b))");
  rules.push_back(move_out_of_sum("sum-factor", "(sum ?n (mul ?a ?b))", ExprOp::kMul));
  rules.push_back(move_into_sum("sum-factor-rev", "(mul (sum ?n ?a) ?b)", ExprOp::kMul));
  rules.push_back(move_out_of_sum("sum-divisor", "(sum ?n (div ?a ?b))", ExprOp::kDiv));
  rules.push_back(move_into_sum("sum-divisor-rev", "(div (sum ?n ?a) ?b)", ExprOp::kDiv));
  return rules;
}

}  // namespace mj::absexpr
