#include "cc/search/op_admission.h"

#include "cc/absexpr/derive.h"
#include "cc/search/op_proposals.h"
#include "cc/search/recomputation.h"
#include "cc/search/stabilizers.h"

namespace mj::search {

using absexpr::abstract_expression_of_op;
using absexpr::ExprId;
using ir::Graph;
using ir::Op;
using ir::OpKind;

std::optional<AdmittedOp> admit_op(const Graph& g, const Op& op,
                                   const std::vector<TensorFacts>& facts, const ClassTable& table,
                                   const std::vector<ExprId>& exprs, int forloop_range,
                                   SearchShared& shared, Worker& worker) {
  if (!reads_stabilizers_only_to_subtract(op, facts, worker.pruner)) return std::nullopt;
  if (!exp_is_stabilized(op, facts, shared.target_has_unbounded_exp)) return std::nullopt;
  if (op.kind == OpKind::kConcat &&
      g.tensor(op.inputs[0]).shape.size() != g.tensor(op.inputs[1]).shape.size()) {
    return std::nullopt;
  }
  AdmittedOp admitted;
  if (worker.pruner.enabled()) {
    admitted.expr = abstract_expression_of_op(g, op, exprs, forloop_range, worker.pruner.pool());
    if (!worker.pruner.admits(admitted.expr)) {
      shared.pruned.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
  }
  const auto shape = proposal_shape(g, op);
  if (!shape) return std::nullopt;
  for (int t : op.inputs) admitted.in_classes.push_back(facts[t].classes);
  // Only concat adds classes, so only concat pays for a copy of the table.
  if (op.kind == OpKind::kConcat) admitted.concat_table = table;
  auto classes = propagate_classes(op, admitted.in_classes, *shape,
                                   admitted.concat_table ? &*admitted.concat_table : nullptr);
  if (!classes) return std::nullopt;
  if (!max_over_stabilized_index(op, admitted.in_classes[0], shared.classes.max_reduced)) {
    return std::nullopt;
  }
  if (dedupes_values(shared.config) && !subtracts_stabilizer(op, facts) &&
      recomputes_existing(facts, admitted.expr, *classes, worker.pruner)) {
    return std::nullopt;
  }
  admitted.classes = std::move(*classes);
  return admitted;
}

}  // namespace mj::search
