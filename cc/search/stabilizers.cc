#include "cc/search/stabilizers.h"

#include <algorithm>

namespace mj::search {

using absexpr::ExprId;
using ir::Op;
using ir::OpKind;
using ir::ReduceKind;

bool is_max_op(const Op& op) {
  return (op.kind == OpKind::kReduce && op.reduce == ReduceKind::kMax) ||
         op.kind == OpKind::kAccumMaxLast;
}

bool max_over_stabilized_index(const Op& op, const DimClasses& x,
                               const std::vector<int>& target_max_classes) {
  if (op.kind != OpKind::kReduce || op.reduce != ReduceKind::kMax) return true;
  return std::find(target_max_classes.begin(), target_max_classes.end(), x[op.dim]) !=
         target_max_classes.end();
}

bool reads_stabilizers_only_to_subtract(const Op& op, const std::vector<TensorFacts>& facts,
                                        Pruner& pruner) {
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorFacts& m = facts[op.inputs[i]];
    if (!m.stabilizer) continue;
    if (op.kind != OpKind::kSub || i != 1) return false;
    const TensorFacts& x = facts[op.inputs[0]];
    if (x.classes.size() != m.classes.size()) return false;
    for (size_t d = 0; d < x.classes.size(); ++d) {
      if (m.classes[d] != x.classes[d] && m.classes[d] != kUnitClass) return false;
    }
    if (!pruner.same_value(x.expr, m.stabilizes)) return false;
  }
  return true;
}

TensorFacts new_tensor_facts(const Op& op, ExprId expr, const DimClasses& classes,
                             const std::vector<TensorFacts>& facts) {
  TensorFacts f{expr, classes, 0};
  if (is_max_op(op)) {
    f.stabilizer = true;
    f.stabilizes = facts[op.inputs[0]].expr;
  }
  // admit_op has checked that a stabilizer is only subtracted from what it was taken of.
  f.bounded_above =
      subtracts_stabilizer(op, facts) ||
      (op.kind == OpKind::kMulScalar && op.scalar > 0 && facts[op.inputs[0]].bounded_above);
  return f;
}

bool exp_is_stabilized(const Op& op, const std::vector<TensorFacts>& facts,
                       bool target_has_unbounded_exp) {
  return op.kind != OpKind::kExp || target_has_unbounded_exp || facts[op.inputs[0]].bounded_above;
}

bool subtracts_stabilizer(const Op& op, const std::vector<TensorFacts>& facts) {
  return op.kind == OpKind::kSub && facts[op.inputs[1]].stabilizer;
}

}  // namespace mj::search
