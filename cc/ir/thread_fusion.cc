// Thread-level fusion groups. An elementwise op joins the group of the first operand (in
// operand order) whose producer is a computation op, whose value it is the only consumer of,
// and which has the same phase and the same shape as the op's result: then the producer's
// value never needs to leave registers (GPU) or the vectorized pass (CPU). A broadcast
// operand is excluded because fusing it would recompute it for every element it is stretched
// over.
#include "cc/ir/thread_fusion.h"

namespace mj::ir {

std::vector<int> thread_fusion_groups(const BlockGraph& g) {
  const std::vector<Op>& ops = g.ops();
  const std::vector<Tensor>& tensors = g.tensors();
  // Distinct consumer ops of each tensor (a store counts: the value must be materialized).
  std::vector<int> consumers(tensors.size(), 0);
  for (const Op& op : ops) {
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      bool repeated = false;
      for (size_t j = 0; j < i; ++j) repeated |= op.inputs[j] == op.inputs[i];
      if (!repeated) ++consumers[op.inputs[i]];
    }
  }
  std::vector<int> group(ops.size(), -1);
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind == OpKind::kInput || op.kind == OpKind::kOutput) continue;
    group[o] = int(o);
    if (!is_elementwise(op.kind)) continue;
    const Tensor& result = tensors[op.outputs[0]];
    for (int in : op.inputs) {
      const Tensor& operand = tensors[in];
      const int producer = operand.producer;
      if (group[producer] < 0) continue;  // an input tile: loaded, not computed
      if (consumers[in] != 1) continue;
      if (operand.phase != result.phase || operand.shape != result.shape) continue;
      group[o] = group[producer];
      break;
    }
  }
  return group;
}

}  // namespace mj::ir
