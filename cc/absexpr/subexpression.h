#pragma once
// The pruning query (DESIGN.md §4): a partial graph survives only if every tensor's abstract
// expression is a subexpression of the target's, modulo the axioms. The target's e-graph is
// saturated once, before the search; every e-class of it is a subterm of some form of the
// target. A candidate is then a subexpression exactly when one of its forms is an e-class:
// a bottom-up hash-cons lookup, each child an existing class, then the node itself.
//
// Two ways to ask, and the trade-off between them:
//  * is_subexpression / SubexpressionOracle: only the candidate's own spelling is looked up.
//    A few hash lookups per new tensor (children are memoized), so it can run on every
//    candidate. It relies on the target's saturation having produced that spelling; with the
//    axioms of axioms.h and a saturated target it has, for the forms the search builds
//    (tile sums, pulled-out divisors, any grouping of products).
//  * is_subexpression_modulo_axioms: also saturates the candidate's own small e-graph with
//    the same axioms and accepts if any of its forms is in the target. It covers a target
//    whose saturation stopped at a limit, at the cost of a small saturation per call
//    (~0.1-1 ms): use it as a second opinion before pruning something expensive, not per op.
//
// Two kinds of terms are accepted without an e-class, since there is nothing to compare:
// a constant (e.g. a softmax max, which is the constant 0) and a concat whose parts are both
// accepted. A term built on top of one of them has no class, so it is found only through
// derivation's own rewriting (matmul of concats becomes a sum of matmuls).
#include <cstdint>
#include <vector>

#include "cc/absexpr/axioms.h"
#include "cc/absexpr/egraph.h"
#include "cc/absexpr/expr.h"
#include "cc/absexpr/runner.h"

namespace mj {

struct SaturatedTarget {
  EGraph egraph;
  std::vector<ClassId> roots;   // one per target expression
  std::vector<Rewrite> axioms;  // what it was saturated with, for the local check
  SaturationReport report;
  bool complete() const { return report.saturated(); }
};

// Adds the targets to a fresh e-graph and saturates it under the axioms, with the sum
// counts bounded by the targets' own (AxiomOptions::sum_count_universe).
SaturatedTarget saturate_target(const ExprPool& pool, const std::vector<ExprId>& targets,
                                const SaturationLimits& limits = {});

// Where a candidate term sits in the target.
struct Placement {
  enum Kind : uint8_t { kAbsent, kClass, kClassless };
  Kind kind = kAbsent;
  ClassId cls = 0;  // kClass only
  bool found() const { return kind != kAbsent; }
};

// The placement of node n of `pool`, given the placements of its children.
Placement place_node(const EGraph& target, const Node& n, const Placement* children);

bool is_subexpression(const EGraph& saturated_target, const ExprPool& pool, ExprId candidate);

// is_subexpression with memoization over one pool, for one search thread: a new tensor costs
// one lookup when its operands were asked about before. Reads the target only.
class SubexpressionOracle {
 public:
  explicit SubexpressionOracle(const EGraph& saturated_target) : target_(saturated_target) {}
  Placement place(const ExprPool& pool, ExprId candidate);  // always the same pool
  bool contains(const ExprPool& pool, ExprId candidate) { return place(pool, candidate).found(); }

 private:
  const EGraph& target_;
  const ExprPool* pool_ = nullptr;
  std::vector<Placement> memo_;
  std::vector<bool> known_;
};

// The slower, more complete check described above.
bool is_subexpression_modulo_axioms(const SaturatedTarget& target, const ExprPool& pool,
                                    ExprId candidate, const SaturationLimits& local_limits);

}  // namespace mj
