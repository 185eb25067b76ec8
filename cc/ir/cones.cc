#include "cc/ir/cones.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"
#include "cc/ir/hash.h"

namespace mj::ir {
namespace {

bool is_heavy(const Op& op) { return op.kind == OpKind::kMatmul || op.kind == OpKind::kCustomized; }

// The ops (indices) that tensor t needs, inputs included, marked in `in`.
void mark_cone(const KernelGraph& g, int t, std::vector<bool>& in) {
  std::vector<int> todo{t};
  while (!todo.empty()) {
    const int op = g.tensor(todo.back()).producer;
    todo.pop_back();
    if (in[op]) continue;
    in[op] = true;
    for (int u : g.ops()[op].inputs) todo.push_back(u);
  }
}

int find(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && a.dtype == b.dtype;
}

}  // namespace

std::vector<OutputCone> output_cones(const KernelGraph& g) {
  const std::vector<Op>& ops = g.ops();
  const std::vector<int>& outs = g.output_ids();
  const int n = int(outs.size());
  std::vector<std::vector<bool>> cone(n, std::vector<bool>(ops.size(), false));
  for (int k = 0; k < n; ++k) mark_cone(g, outs[k], cone[k]);
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (size_t o = 0; o < ops.size(); ++o) {
    if (!is_heavy(ops[o])) continue;
    int first = -1;
    for (int k = 0; k < n; ++k) {
      if (!cone[k][o]) continue;
      if (first < 0) {
        first = k;
      } else {
        parent[find(parent, k)] = find(parent, first);
      }
    }
  }
  std::vector<int> group_of(n, -1);
  std::vector<std::vector<int>> groups;
  for (int k = 0; k < n; ++k) {
    const int root = find(parent, k);
    if (group_of[root] < 0) {
      group_of[root] = int(groups.size());
      groups.emplace_back();
    }
    groups[group_of[root]].push_back(k);
  }
  // A group with no matmul (an output passed through, a norm returned) joins the first
  // group that has one: alone it would be a program with nothing to fuse.
  std::vector<std::vector<int>> heavy, light;
  for (std::vector<int>& group : groups) {
    bool any = false;
    for (size_t o = 0; o < ops.size(); ++o) any = any || (cone[group[0]][o] && is_heavy(ops[o]));
    (any ? heavy : light).push_back(std::move(group));
  }
  if (heavy.size() < 2) return {};
  for (const std::vector<int>& group : light) {
    heavy[0].insert(heavy[0].end(), group.begin(), group.end());
  }
  std::sort(heavy[0].begin(), heavy[0].end());
  groups = std::move(heavy);
  const std::vector<int>& inputs = g.input_ids();
  std::vector<OutputCone> cones;
  for (const std::vector<int>& group : groups) {
    std::vector<bool> in(ops.size(), false);
    for (int k : group) {
      for (size_t o = 0; o < ops.size(); ++o) in[o] = in[o] || cone[k][o];
    }
    OutputCone c;
    std::vector<int> id(g.tensors().size(), -1);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!in[g.tensor(inputs[i]).producer]) continue;
      c.inputs.push_back(int(i));
      const Tensor& t = g.tensor(inputs[i]);
      id[inputs[i]] = c.program.new_input(t.shape, t.dtype);
    }
    for (size_t o = 0; o < ops.size(); ++o) {
      if (in[o] && ops[o].kind != OpKind::kInput && ops[o].kind != OpKind::kOutput) {
        copy_kernel_op(g, ops[o], c.program, id);
      }
    }
    for (int k : group) {
      c.program.mark_output(id.at(outs[k]));
      c.outputs.push_back(k);
    }
    cones.push_back(std::move(c));
  }
  return cones;
}

KernelGraph join_cones(const KernelGraph& g, const std::vector<OutputCone>& cones,
                       const std::vector<KernelGraph>& candidates) {
  if (candidates.size() != cones.size()) {
    throw IrError("join_cones: " + std::to_string(candidates.size()) + " candidates for " +
                  std::to_string(cones.size()) + " cones");
  }
  KernelGraph out;
  std::vector<int> input_at;  // the original's input positions -> ids in out
  for (int t : g.input_ids())
    input_at.push_back(out.new_input(g.tensor(t).shape, g.tensor(t).dtype));
  std::vector<int> output_at(g.output_ids().size(), -1);
  std::map<std::string, std::vector<int>> made;  // a kernel and its inputs -> its outputs
  for (size_t i = 0; i < cones.size(); ++i) {
    const OutputCone& cone = cones[i];
    const KernelGraph& c = candidates[i];
    const std::string which = "join_cones: the candidate for cone " + std::to_string(i);
    if (c.input_ids().size() != cone.inputs.size() ||
        c.output_ids().size() != cone.outputs.size()) {
      throw IrError(which + " has " + std::to_string(c.input_ids().size()) + " inputs and " +
                    std::to_string(c.output_ids().size()) + " outputs, the cone " +
                    std::to_string(cone.inputs.size()) + " and " +
                    std::to_string(cone.outputs.size()));
    }
    std::vector<int> id(c.tensors().size(), -1);
    for (size_t j = 0; j < cone.inputs.size(); ++j) {
      const int original = g.input_ids().at(cone.inputs[j]);
      if (!same_tensor(c.tensor(c.input_ids()[j]), g.tensor(original))) {
        throw IrError(which + ": input " + std::to_string(j) + " differs in shape or dtype");
      }
      id[c.input_ids()[j]] = input_at.at(cone.inputs[j]);
    }
    for (const Op& op : c.ops()) {
      if (op.kind == OpKind::kInput || op.kind == OpKind::kOutput) continue;
      if (op.kind != OpKind::kCustomized) {
        copy_kernel_op(c, op, out, id);
        continue;
      }
      // Each cone recomputes what the cones share (a decode step's q, k and v cones each
      // norm the same x): a kernel another cone's candidate already runs on the same values
      // is run once, its outputs read by both.
      std::string key = block_graph_hash(*op.block_graph);
      for (int t : op.inputs) key += " " + std::to_string(id.at(t));
      const auto [at, fresh] = made.try_emplace(key);
      if (fresh) {
        copy_kernel_op(c, op, out, id);
        for (int t : op.outputs) at->second.push_back(id.at(t));
      } else {
        for (size_t k = 0; k < op.outputs.size(); ++k) id.at(op.outputs[k]) = at->second.at(k);
      }
    }
    for (size_t j = 0; j < cone.outputs.size(); ++j) {
      const int original = g.output_ids().at(cone.outputs[j]);
      if (!same_tensor(c.tensor(c.output_ids()[j]), g.tensor(original))) {
        throw IrError(which + ": output " + std::to_string(j) + " differs in shape or dtype");
      }
      output_at.at(cone.outputs[j]) = id.at(c.output_ids()[j]);
    }
  }
  for (size_t k = 0; k < output_at.size(); ++k) {
    if (output_at[k] < 0)
      throw IrError("join_cones: output " + std::to_string(k) + " is in no cone");
    out.mark_output(output_at[k]);
  }
  return out;
}

}  // namespace mj::ir
