#pragma once
// Abstract-expression pruning for one search thread (cc/absexpr/subexpression.h). The target's
// e-graph is saturated once and shared read-only; each thread derives its candidates' expressions
// into its own pool and asks a memoizing SubexpressionOracle, so a new tensor costs one hash-cons
// lookup. With pruning off nothing is derived and everything is admitted (the ablation).
// Expressions come from cc/absexpr/derive.h (abstract_expression_of_op), one op at a time.
#include <memory>
#include <optional>
#include <vector>

#include "cc/absexpr/expr.h"
#include "cc/absexpr/subexpression.h"
#include "cc/ir/graph.h"

namespace mj::search {

// The target's saturated e-graph, built once per search.
struct PruningTarget {
  absexpr::ExprPool pool;
  std::vector<absexpr::ExprId> outputs;  // the target outputs' expressions in `pool`
  absexpr::SaturatedTarget saturated;
};
// Derives the target's expressions with cc/absexpr/derive.h (the rules every candidate tensor
// is derived with too) and saturates them. Throws for a target derivation cannot express.
std::unique_ptr<PruningTarget> make_pruning_target(const ir::KernelGraph& target,
                                                   const absexpr::SaturationLimits& limits);

class Pruner {
 public:
  explicit Pruner(const PruningTarget* target);  // nullptr: pruning off
  bool enabled() const { return target_ != nullptr; }
  absexpr::ExprPool& pool() { return pool_; }
  absexpr::ExprId input(int kernel_input_index) { return pool_.var(kernel_input_index); }
  // Whether a tensor with this expression may be part of an equivalent graph.
  bool admits(absexpr::ExprId e);
  // Whether e is, modulo the axioms, target output `i` (a necessary condition for a
  // complete candidate whose outputs are checked by the verifier afterwards).
  bool matches_output(absexpr::ExprId e, int i);
  // Whether a and b are the same term modulo the axioms: the same e-class of the target, or
  // partial sums of the same count over the same e-class (or the same spelling).
  bool same_value(absexpr::ExprId a, absexpr::ExprId b);
  // Whether e is a partial sum of a sum the target has (subexpression.h), the only thing
  // summing partial results over blocks can complete. True when pruning is off.
  bool is_partial_sum(absexpr::ExprId e);

 private:
  const PruningTarget* target_;
  absexpr::ExprPool pool_;
  std::optional<absexpr::SubexpressionOracle> oracle_;
};

}  // namespace mj::search
