#include "cc/search/stabilizers.h"

#include <algorithm>

namespace mj {

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

bool reads_stabilizers_only_to_subtract(const Graph& g, const Op& op,
                                        const std::vector<TensorFacts>& facts) {
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const int t = op.inputs[i];
    if (!facts[t].stabilizer) continue;
    if (op.kind != OpKind::kSub || i != 1) return false;
    const Op& producer = g.ops()[g.tensor(t).producer];
    if (is_max_op(producer) && producer.inputs[0] != op.inputs[0]) return false;
  }
  return true;
}

bool subtracts_stabilizer(const Op& op, const std::vector<TensorFacts>& facts) {
  return op.kind == OpKind::kSub && facts[op.inputs[1]].stabilizer;
}

}  // namespace mj
