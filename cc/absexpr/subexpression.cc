#include "cc/absexpr/subexpression.h"

#include <algorithm>
#include <stdexcept>

namespace mj::absexpr {

namespace {

// The Sum counts of the targets: the universe the sum axioms may merge into.
std::vector<int64_t> sum_counts(const ExprPool& pool, const std::vector<ExprId>& targets) {
  std::vector<int64_t> counts;
  std::vector<ExprId> stack(targets.begin(), targets.end());
  std::vector<bool> seen(pool.size(), false);
  while (!stack.empty()) {
    const ExprId id = stack.back();
    stack.pop_back();
    if (seen[id]) continue;
    seen[id] = true;
    const Node& n = pool.node(id);
    if (n.op == ExprOp::kSum) counts.push_back(n.a);
    for (int i = 0; i < n.arity(); ++i) stack.push_back(n.children[i]);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

Placement in_class(ClassId c) { return Placement{Placement::kClass, c, 0}; }

// sum(count, summand) in the target: a class, a partial sum, or absent.
Placement place_sum(const EGraph& g, int64_t count, ClassId summand) {
  if (auto c = g.lookup(Node::unary(ExprOp::kSum, summand, count))) return in_class(*c);
  summand = g.find(summand);
  for (const auto& [node, cls] : g.eclass(summand).parents) {
    if (node.op == ExprOp::kSum && g.find(node.children[0]) == summand && node.a % count == 0) {
      return Placement{Placement::kPartialSum, summand, count};
    }
  }
  return {};
}

// op(x, y) for placements that are classes: the class if the target has the node.
Placement place_in_class(const EGraph& g, Node n, ClassId x, ClassId y = 0) {
  n.children = {x, n.arity() > 1 ? y : 0};
  if (auto c = g.lookup(n)) return in_class(*c);
  return {};
}

}  // namespace

SaturatedTarget saturate_target(const ExprPool& pool, const std::vector<ExprId>& targets,
                                const SaturationLimits& limits) {
  SaturatedTarget t;
  AxiomOptions options;
  options.sum_count_universe = sum_counts(pool, targets);
  t.axioms = abstract_expression_axioms(options);
  for (ExprId e : targets) t.roots.push_back(t.egraph.add_expr(pool, e));
  t.report = saturate(t.egraph, t.axioms, limits);
  for (ClassId& r : t.roots) r = t.egraph.find(r);
  return t;
}

Placement place_node(const EGraph& target, const Node& n, const Placement* children) {
  const int arity = n.arity();
  bool all_classes = true;
  for (int i = 0; i < arity; ++i) {
    if (!children[i].found()) return {};
    all_classes = all_classes && children[i].kind == Placement::kClass;
  }
  if (all_classes) {
    const Placement p =
        place_in_class(target, n, arity > 0 ? children[0].cls : 0, arity > 1 ? children[1].cls : 0);
    if (p.found()) return p;
    if (n.op == ExprOp::kSum) {
      // A partial sum, or sum(m, c) where c is itself a sum(k, e): then it is sum(m*k, e).
      const Placement partial = place_sum(target, n.a, children[0].cls);
      if (partial.found()) return partial;
      for (const Node& inner : target.eclass(children[0].cls).nodes) {
        int64_t total = 0;
        if (inner.op != ExprOp::kSum || __builtin_mul_overflow(n.a, inner.a, &total)) continue;
        const Placement merged = place_sum(target, total, inner.children[0]);
        if (merged.found()) return merged;
      }
    }
  }
  if (n.op == ExprOp::kConst || n.op == ExprOp::kConcat) return Placement{Placement::kClassless};

  // A partial sum under an operator: push the operator into the sum.
  const Placement& a = children[0];
  const Placement* b = arity > 1 ? &children[1] : nullptr;
  auto partial = [](const Placement& p) { return p.kind == Placement::kPartialSum; };
  auto cls = [](const Placement& p) { return p.kind == Placement::kClass; };
  switch (n.op) {
    case ExprOp::kSum: {
      int64_t total = 0;
      if (!partial(a) || __builtin_mul_overflow(n.a, a.count, &total)) return {};
      return place_sum(target, total, a.cls);
    }
    case ExprOp::kNeg: {
      if (!partial(a)) return {};
      const Placement inner = place_in_class(target, n, a.cls);
      return inner.found() ? place_sum(target, a.count, inner.cls) : Placement{};
    }
    case ExprOp::kMul:
    case ExprOp::kDiv:
    case ExprOp::kAdd: {
      Placement inner;
      int64_t count = 0;
      if (partial(a) && partial(*b)) {
        if (n.op != ExprOp::kAdd || a.count != b->count) return {};
        inner = place_in_class(target, n, a.cls, b->cls);
        count = a.count;
      } else if (n.op == ExprOp::kAdd) {
        return {};  // sum(d, e) + z is not a sum over d of anything
      } else if (partial(a) && cls(*b)) {
        inner = place_in_class(target, n, a.cls, b->cls);
        count = a.count;
      } else if (n.op == ExprOp::kMul && cls(a) && partial(*b)) {
        inner = place_in_class(target, n, a.cls, b->cls);
        count = b->count;
      } else {
        return {};
      }
      return inner.found() ? place_sum(target, count, inner.cls) : Placement{};
    }
    default: return {};
  }
}

bool is_subexpression(const EGraph& saturated_target, const ExprPool& pool, ExprId candidate) {
  SubexpressionOracle oracle(saturated_target);
  return oracle.contains(pool, candidate);
}

Placement SubexpressionOracle::place(const ExprPool& pool, ExprId candidate) {
  if (pool_ == nullptr) pool_ = &pool;
  if (pool_ != &pool) throw std::logic_error("SubexpressionOracle: used with a second pool");
  if (memo_.size() < pool.size()) {
    memo_.resize(pool.size());
    known_.resize(pool.size(), false);
  }
  // Children have smaller ids than their parents, so an explicit stack replaces recursion.
  std::vector<ExprId> stack{candidate};
  while (!stack.empty()) {
    const ExprId id = stack.back();
    if (known_[id]) {
      stack.pop_back();
      continue;
    }
    const Node& n = pool.node(id);
    bool ready = true;
    for (int i = 0; i < n.arity(); ++i) {
      if (!known_[n.children[i]]) ready = false, stack.push_back(n.children[i]);
    }
    if (!ready) continue;
    Placement children[2];
    for (int i = 0; i < n.arity(); ++i) children[i] = memo_[n.children[i]];
    memo_[id] = place_node(target_, n, children);
    known_[id] = true;
    stack.pop_back();
  }
  return memo_[candidate];
}

bool is_subexpression_modulo_axioms(const SaturatedTarget& target, const ExprPool& pool,
                                    ExprId candidate, const SaturationLimits& local_limits) {
  if (is_subexpression(target.egraph, pool, candidate)) return true;
  EGraph local;
  const ClassId root = local.add_expr(pool, candidate);
  saturate(local, target.axioms, local_limits);

  // Place each local class by any of its nodes, to a fixpoint: a node is placed once its
  // children are. A few placements per local class suffice.
  constexpr size_t kMaxPerClass = 4;
  const std::vector<ClassId> ids = local.class_ids();
  const ClassId bound = ids.empty() ? 0 : ids.back() + 1;
  std::vector<std::vector<Placement>> placed(bound);
  auto same = [](const Placement& p, const Placement& q) {
    return p.kind == q.kind && p.cls == q.cls && p.count == q.count;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (ClassId c : ids) {
      for (const Node& n : local.eclass(c).nodes) {
        const int arity = n.arity();
        // Copies: placed[c] may grow below, and c may be its own child (x = x * 1).
        const std::vector<Placement> none{Placement{}};
        const std::vector<Placement> first = arity > 0 ? placed[local.find(n.children[0])] : none;
        const std::vector<Placement> second = arity > 1 ? placed[local.find(n.children[1])] : none;
        for (const Placement& p0 : first) {
          for (const Placement& p1 : second) {
            const Placement children[2] = {p0, p1};
            const Placement p = place_node(target.egraph, n, children);
            auto& list = placed[c];
            if (!p.found() || list.size() >= kMaxPerClass) continue;
            auto is_p = [&](const Placement& q) { return same(p, q); };
            if (std::none_of(list.begin(), list.end(), is_p)) {
              list.push_back(p);
              changed = true;
            }
          }
        }
      }
    }
  }
  return !placed[local.find(root)].empty();
}

}  // namespace mj::absexpr
