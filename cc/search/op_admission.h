#pragma once
// The checks every proposed op passes before it is appended, at kernel level and in a block
// graph alike: stabilizers only subtracted, the abstract expression a subexpression of the
// target's (counted as pruned otherwise), a valid shape, consistent index classes, a max
// only over the stabilized index, and no second copy of an existing value.
#include <optional>
#include <vector>

#include "cc/absexpr/expr.h"
#include "cc/ir/graph.h"
#include "cc/search/index_classes.h"
#include "cc/search/search_state.h"

namespace mj::search {

struct AdmittedOp {
  absexpr::ExprId expr = 0;                // 0 when pruning is off
  std::vector<DimClasses> in_classes;      // per input
  DimClasses classes;                      // of the result
  std::optional<ClassTable> concat_table;  // the grown table, for a concat only
};

// `exprs` are the abstract expressions of g's tensors (empty when pruning is off);
// `forloop_range` is 1 at kernel level.
std::optional<AdmittedOp> admit_op(const ir::Graph& g, const ir::Op& op,
                                   const std::vector<TensorFacts>& facts, const ClassTable& table,
                                   const std::vector<absexpr::ExprId>& exprs, int forloop_range,
                                   SearchShared& shared, Worker& worker);

}  // namespace mj::search
