#pragma once
// The pruning query: a partial graph survives only if every tensor's abstract
// expression is a subexpression of the target's, modulo the axioms. The target's e-graph is
// saturated once, before the search; every e-class of it is a subterm of some form of the
// target. A candidate is then a subexpression when one of its forms is an e-class: a
// bottom-up hash-cons lookup, each child an existing class, then the node itself.
//
// Three kinds of terms are accepted without being an e-class:
//  * partial sums: sum(d, e) when the target has sum(n, e) and d divides n, the sum over
//    one tile of a loop or grid (sum(n, e) = sum(n/d, sum(d, e))). Materializing every
//    split in the e-graph made it 15 to 30 times larger, so the lookup handles them
//    instead, and pushes what a candidate applies to a partial sum into it, as the axioms
//    would: sum(d, e) * z is sum(d, e * z), likewise z * ., . / z, -., and the sum of two
//    partial sums over the same count; sum(m, .) of a partial sum is sum(m*d, e).
//  * constants absent from the target (e.g. a softmax max, which is the constant 0), and
//  * concats whose parts are both accepted: there is nothing to compare them with.
// A term built on an accepted constant or concat is absent, as is anything else built on a
// partial sum; derivation resolves the useful cases first (matmul of concats).
//
// Two ways to ask, and the trade-off between them:
//  * is_subexpression / SubexpressionOracle: only the candidate's own spelling is looked up.
//    A few hash lookups per new tensor (children are memoized), so it can run on every
//    candidate. It relies on the target's saturation having produced that spelling, which a
//    saturated target does for the forms the search builds (any grouping or order of
//    products, divisors pulled out of sums, means as multiplications).
//  * is_subexpression_modulo_axioms: also saturates the candidate's own small e-graph with
//    the same axioms and accepts if any of its forms is in the target. It covers a target
//    whose saturation stopped at a limit, at the cost of a small saturation per call
//    (0.1-10 ms): a second opinion before pruning something expensive, not a per-op check.
#include <cstdint>
#include <vector>

#include "cc/absexpr/axioms.h"
#include "cc/absexpr/egraph.h"
#include "cc/absexpr/expr.h"
#include "cc/absexpr/runner.h"

namespace mj::absexpr {

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
  enum Kind : uint8_t {
    kAbsent,
    kClass,       // the e-class `cls`
    kPartialSum,  // sum(count, cls): a partial sum of a sum the target has
    kClassless,   // accepted constant or concat
  };
  Kind kind = kAbsent;
  ClassId cls = 0;
  int64_t count = 0;  // kPartialSum only
  bool found() const { return kind != kAbsent; }
};

// The placement of node n, given the placements of its children (n's own children ids are
// ignored). The target must be rebuilt (clean).
Placement place_node(const EGraph& target, const Node& n, const Placement* children);

bool is_subexpression(const EGraph& saturated_target, const ExprPool& pool, ExprId candidate);

// is_subexpression with memoization over one pool, for one search thread: a new tensor costs
// a lookup or two when its operands were asked about before. Reads the target only.
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

}  // namespace mj::absexpr
