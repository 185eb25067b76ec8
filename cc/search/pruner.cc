#include "cc/search/pruner.h"

#include "cc/absexpr/derive.h"

namespace mj::search {

using absexpr::abstract_expressions;
using absexpr::EGraph;
using absexpr::ExprId;
using absexpr::Placement;
using absexpr::saturate_target;
using absexpr::SaturationLimits;
using ir::KernelGraph;

std::unique_ptr<PruningTarget> make_pruning_target(const KernelGraph& target,
                                                   const SaturationLimits& limits) {
  auto t = std::make_unique<PruningTarget>();
  const std::vector<ExprId> all = abstract_expressions(target, t->pool);
  for (int id : target.output_ids()) t->outputs.push_back(all.at(id));
  t->saturated = saturate_target(t->pool, t->outputs, limits);
  return t;
}

Pruner::Pruner(const PruningTarget* target) : target_(target) {
  if (target_) oracle_.emplace(target_->saturated.egraph);
}

bool Pruner::admits(ExprId e) {
  if (!target_) return true;
  return oracle_->contains(pool_, e);
}

bool Pruner::matches_output(ExprId e, int i) {
  if (!target_) return true;
  const Placement p = oracle_->place(pool_, e);
  const EGraph& g = target_->saturated.egraph;
  return p.kind == Placement::kClass && g.find(p.cls) == g.find(target_->saturated.roots.at(i));
}

bool Pruner::same_value(ExprId a, ExprId b) {
  if (a == b) return true;
  if (!target_) return false;
  const Placement pa = oracle_->place(pool_, a), pb = oracle_->place(pool_, b);
  if (pa.kind != pb.kind || pa.count != pb.count) return false;
  if (pa.kind != Placement::kClass && pa.kind != Placement::kPartialSum) return false;
  const EGraph& g = target_->saturated.egraph;
  return g.find(pa.cls) == g.find(pb.cls);
}

bool Pruner::is_partial_sum(ExprId e) {
  if (!target_) return true;
  return oracle_->place(pool_, e).kind == Placement::kPartialSum;
}

}  // namespace mj::search
