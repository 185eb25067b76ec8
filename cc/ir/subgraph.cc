#include "cc/ir/subgraph.h"

#include <algorithm>
#include <string>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"

namespace mj::ir {
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
    computes_before |= ops[o].kind != OpKind::kInput && ops[o].kind != OpKind::kOutput;
  }
  if (!computes_before) return std::nullopt;
  // Tensors are numbered in op order: those made before the cut are the ids below its first.
  const int first_after = ops[cut].outputs.at(0);
  auto made_before = [&](int t) { return t < first_after; };
  auto passes_through = [&](const Op& op) {
    return op.kind == OpKind::kOutput && made_before(op.inputs.at(0));
  };

  GraphSplit split;
  split.cut_tensor = first_after;
  int tail_outputs = 0;
  for (size_t o = 0; o < ops.size(); ++o) {
    if (o < cut && !passes_through(ops[o])) continue;
    if (passes_through(ops[o])) {
      split.output_order.push_back(-1 - int(split.passed.size()));
      split.passed.push_back(ops[o].inputs[0]);
      continue;
    }
    if (ops[o].kind == OpKind::kOutput) split.output_order.push_back(tail_outputs++);
    for (int t : ops[o].inputs) {
      if (made_before(t) &&
          std::find(split.boundary.begin(), split.boundary.end(), t) == split.boundary.end()) {
        split.boundary.push_back(t);
      }
    }
  }
  if (tail_outputs == 0) return std::nullopt;
  std::vector<int> id(g.tensors().size(), -1);
  for (size_t o = 0; o < cut; ++o) {
    if (ops[o].kind != OpKind::kOutput) copy_kernel_op(g, ops[o], split.prefix, id);
  }
  std::fill(id.begin(), id.end(), -1);
  for (int t : split.boundary) id[t] = split.tail.new_input(g.tensor(t).shape, g.tensor(t).dtype);
  for (size_t o = cut; o < ops.size(); ++o) {
    if (!passes_through(ops[o])) copy_kernel_op(g, ops[o], split.tail, id);
  }
  return split;
}

namespace {

// Appends the tail candidate's ops to `out`, its inputs read from `boundary` (ids in out),
// then marks the original's outputs in their order: the tail candidate's, and the passed
// ones from `passed` (ids in out).
void append_tail(const GraphSplit& split, const KernelGraph& tail_candidate,
                 const std::vector<int>& boundary, const std::vector<int>& passed, KernelGraph& out,
                 const char* what) {
  const std::vector<int>& inputs = tail_candidate.input_ids();
  if (inputs.size() != boundary.size()) {
    throw IrError(std::string(what) + ": the tail candidate has " + std::to_string(inputs.size()) +
                  " inputs, the tail " + std::to_string(boundary.size()));
  }
  std::vector<int> id(tail_candidate.tensors().size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) id[inputs[i]] = boundary[i];
  std::vector<int> tail_outputs;
  for (const Op& op : tail_candidate.ops()) {
    if (op.kind == OpKind::kOutput) {
      tail_outputs.push_back(id.at(op.inputs.at(0)));
    } else if (op.kind != OpKind::kInput) {
      copy_kernel_op(tail_candidate, op, out, id);
    }
  }
  const size_t want = split.output_order.size() - split.passed.size();
  if (tail_outputs.size() != want) {
    throw IrError(std::string(what) + ": the tail candidate has " +
                  std::to_string(tail_outputs.size()) + " outputs, the tail " +
                  std::to_string(want));
  }
  for (int k : split.output_order) out.mark_output(k >= 0 ? tail_outputs[k] : passed[-1 - k]);
}

bool is_input_of(const KernelGraph& g, int t) {
  return g.ops()[g.tensor(t).producer].kind == OpKind::kInput;
}

// The prefix program's outputs, as original ids: the computed boundary values, then the
// passed outputs not among them.
std::vector<int> prefix_outputs(const GraphSplit& split) {
  std::vector<int> made;
  for (const std::vector<int>* values : {&split.boundary, &split.passed}) {
    for (int t : *values) {
      if (!is_input_of(split.prefix, t) && std::find(made.begin(), made.end(), t) == made.end()) {
        made.push_back(t);
      }
    }
  }
  return made;
}

}  // namespace

KernelGraph splice(const GraphSplit& split, const KernelGraph& tail_candidate) {
  KernelGraph out = split.prefix;  // the original's ids
  append_tail(split, tail_candidate, split.boundary, split.passed, out, "splice");
  return out;
}

KernelGraph prefix_program(const GraphSplit& split) {
  KernelGraph out = split.prefix;
  for (int t : prefix_outputs(split)) out.mark_output(t);
  return out;
}

KernelGraph splice_parts(const GraphSplit& split, const KernelGraph& prefix_candidate,
                         const KernelGraph& tail_candidate) {
  const std::vector<int>& prefix_inputs = split.prefix.input_ids();
  if (prefix_candidate.input_ids().size() != prefix_inputs.size()) {
    throw IrError("splice_parts: the prefix candidate has " +
                  std::to_string(prefix_candidate.input_ids().size()) + " inputs, the prefix " +
                  std::to_string(prefix_inputs.size()));
  }
  KernelGraph out;
  std::vector<int> id(prefix_candidate.tensors().size(), -1);
  std::vector<int> made;  // the prefix candidate's outputs, as ids in out
  for (const Op& op : prefix_candidate.ops()) {
    if (op.kind == OpKind::kOutput) {
      made.push_back(id.at(op.inputs.at(0)));
    } else {
      copy_kernel_op(prefix_candidate, op, out, id);
    }
  }
  // The original's inputs are the first tensors of both the prefix and `out`, in order.
  std::vector<int> original_input(split.prefix.tensors().size(), -1);
  for (size_t i = 0; i < prefix_inputs.size(); ++i) {
    original_input[prefix_inputs[i]] = out.input_ids()[i];
  }
  const std::vector<int> wanted = prefix_outputs(split);
  if (made.size() != wanted.size()) {
    throw IrError("splice_parts: the prefix candidate makes " + std::to_string(made.size()) +
                  " outputs, the prefix program " + std::to_string(wanted.size()));
  }
  std::vector<int> made_of(split.prefix.tensors().size(), -1);  // original id -> id in out
  for (size_t i = 0; i < wanted.size(); ++i) {
    const Tensor& want = split.prefix.tensor(wanted[i]);
    const Tensor& got = out.tensor(made[i]);
    if (got.shape != want.shape || got.dtype != want.dtype) {
      throw IrError("splice_parts: the prefix candidate's output " + std::to_string(i) +
                    " does not have the shape and dtype of the prefix program's");
    }
    made_of[wanted[i]] = made[i];
  }
  auto in_out = [&](int t) {
    return is_input_of(split.prefix, t) ? original_input.at(t) : made_of.at(t);
  };
  std::vector<int> boundary, passed;
  for (int t : split.boundary) boundary.push_back(in_out(t));
  for (int t : split.passed) passed.push_back(in_out(t));
  append_tail(split, tail_candidate, boundary, passed, out, "splice_parts");
  return out;
}

}  // namespace mj::ir
