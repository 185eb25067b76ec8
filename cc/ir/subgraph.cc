#include "cc/ir/subgraph.h"

#include <algorithm>
#include <string>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"

namespace mj::ir {
namespace {

// Appends `op` of `from` to `to`, its inputs renamed through `id` (from's ids -> to's), and
// records the new ids of its outputs there.
void copy_op(const KernelGraph& from, const Op& op, KernelGraph& to, std::vector<int>& id) {
  std::vector<int> inputs;
  for (int t : op.inputs) inputs.push_back(id.at(t));
  std::vector<int> outputs;
  switch (op.kind) {
    case OpKind::kInput: {
      const Tensor& t = from.tensor(op.outputs[0]);
      outputs = {to.new_input(t.shape, t.dtype)};
      break;
    }
    case OpKind::kOutput: to.mark_output(inputs.at(0)); break;
    case OpKind::kCustomized: outputs = to.customized(inputs, op.block_graph); break;
    default: outputs = {append_op(to, op, inputs)}; break;
  }
  for (size_t i = 0; i < outputs.size(); ++i) id.at(op.outputs[i]) = outputs[i];
}

}  // namespace

std::optional<GraphSplit> split_before_first_computed_matmul(const KernelGraph& g) {
  const std::vector<Op>& ops = g.ops();
  auto made_by_input = [&](int t) { return ops[g.tensor(t).producer].kind == OpKind::kInput; };
  size_t cut = 0;
  while (cut < ops.size() &&
         !(ops[cut].kind == OpKind::kMatmul && std::any_of(
                                                   ops[cut].inputs.begin(), ops[cut].inputs.end(),
                                                   [&](int t) { return !made_by_input(t); }))) {
    ++cut;
  }
  if (cut == ops.size()) return std::nullopt;
  bool computes_before = false;
  for (size_t o = 0; o < cut; ++o) {
    if (ops[o].kind == OpKind::kOutput) return std::nullopt;  // the tail would not make it
    computes_before |= ops[o].kind != OpKind::kInput;
  }
  if (!computes_before) return std::nullopt;
  // Tensors are numbered in op order: those made before the cut are the ids below its first.
  const int first_after = ops[cut].outputs.at(0);
  auto made_before = [&](int t) { return t < first_after; };

  GraphSplit split;
  split.cut_tensor = first_after;
  for (size_t o = cut; o < ops.size(); ++o) {
    if (ops[o].kind == OpKind::kOutput && made_before(ops[o].inputs.at(0))) {
      return std::nullopt;  // an output passed through from before the cut
    }
    for (int t : ops[o].inputs) {
      if (made_before(t) &&
          std::find(split.boundary.begin(), split.boundary.end(), t) == split.boundary.end()) {
        split.boundary.push_back(t);
      }
    }
  }
  std::vector<int> id(g.tensors().size(), -1);
  for (size_t o = 0; o < cut; ++o) copy_op(g, ops[o], split.prefix, id);
  std::fill(id.begin(), id.end(), -1);
  for (int t : split.boundary) id[t] = split.tail.new_input(g.tensor(t).shape, g.tensor(t).dtype);
  for (size_t o = cut; o < ops.size(); ++o) copy_op(g, ops[o], split.tail, id);
  return split;
}

KernelGraph splice(const GraphSplit& split, const KernelGraph& tail_candidate) {
  const std::vector<int>& inputs = tail_candidate.input_ids();
  if (inputs.size() != split.boundary.size()) {
    throw IrError("splice: the candidate has " + std::to_string(inputs.size()) +
                  " inputs, the tail " + std::to_string(split.boundary.size()));
  }
  KernelGraph out = split.prefix;
  std::vector<int> id(tail_candidate.tensors().size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) id[inputs[i]] = split.boundary[i];
  for (const Op& op : tail_candidate.ops()) {
    if (op.kind != OpKind::kInput) copy_op(tail_candidate, op, out, id);
  }
  return out;
}

}  // namespace mj::ir
