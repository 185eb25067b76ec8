#include "cc/absexpr/subexpression.h"

#include <algorithm>
#include <stdexcept>

namespace mj {

namespace {

// The Sum counts of the targets: the universe the sum axioms may factor into.
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
  Node probe = n;
  bool all_in_classes = true;
  for (int i = 0; i < n.arity(); ++i) {
    if (!children[i].found()) return {};
    if (children[i].kind == Placement::kClassless) all_in_classes = false;
    probe.children[i] = children[i].cls;
  }
  if (all_in_classes) {
    if (auto c = target.lookup(probe)) return Placement{Placement::kClass, *c};
  }
  if (n.op == ExprOp::kConst || n.op == ExprOp::kConcat) return Placement{Placement::kClassless};
  return {};
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

  // Map each local class to the target classes that hold one of its forms, to a fixpoint:
  // a node is placed once all its children are. A few classes per local class suffice.
  constexpr size_t kMaxPerClass = 4;
  const std::vector<ClassId> ids = local.class_ids();
  const ClassId bound = ids.empty() ? 0 : ids.back() + 1;
  std::vector<std::vector<ClassId>> in_target(bound);
  std::vector<bool> classless(bound, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (ClassId c : ids) {
      for (const Node& n : local.eclass(c).nodes) {
        const int arity = n.arity();
        // Every combination of the children's target classes (arity <= 2), plus the
        // classless placement of each child.
        std::vector<Placement> options[2];
        bool placeable = true;
        for (int i = 0; i < arity; ++i) {
          const ClassId child = local.find(n.children[i]);
          for (ClassId t : in_target[child]) options[i].push_back({Placement::kClass, t});
          if (classless[child]) options[i].push_back({Placement::kClassless});
          placeable = placeable && !options[i].empty();
        }
        if (!placeable) continue;
        const size_t n0 = arity > 0 ? options[0].size() : 1;
        const size_t n1 = arity > 1 ? options[1].size() : 1;
        for (size_t i0 = 0; i0 < n0; ++i0) {
          for (size_t i1 = 0; i1 < n1; ++i1) {
            Placement children[2];
            if (arity > 0) children[0] = options[0][i0];
            if (arity > 1) children[1] = options[1][i1];
            const Placement p = place_node(target.egraph, n, children);
            if (p.kind == Placement::kClass) {
              auto& list = in_target[c];
              if (list.size() < kMaxPerClass &&
                  std::find(list.begin(), list.end(), p.cls) == list.end()) {
                list.push_back(p.cls);
                changed = true;
              }
            } else if (p.kind == Placement::kClassless && !classless[c]) {
              classless[c] = true;
              changed = true;
            }
          }
        }
      }
    }
  }
  const ClassId r = local.find(root);
  return !in_target[r].empty() || classless[r];
}

}  // namespace mj
