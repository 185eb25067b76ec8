#include "cc/cost/kernel_graph_work.h"

#include <algorithm>
#include <numeric>

#include "cc/cost/block_graph_work.h"
#include "cc/cost/cpu_vector_cost.h"
#include "cc/cost/op_flops.h"

namespace mj::cost {

using ir::is_elementwise;
using ir::KernelGraph;
using ir::Op;
using ir::op_kind_name;
using ir::OpKind;
using ir::Shape;

namespace {

bool is_reduction(OpKind k) { return k == OpKind::kReduce || k == OpKind::kRmsNorm; }
bool is_fusible(OpKind k) { return is_elementwise(k) || is_reduction(k); }

double tensor_bytes(const KernelGraph& g, int t) {
  return tensor_elements(g.tensor(t).shape) * dtype_bytes(g.tensor(t).dtype);
}

// Union-find over op indices; the root is always the group's first op, so the result does
// not depend on the order in which groups were merged.
class FusionGroups {
 public:
  explicit FusionGroups(const KernelGraph& g)
      : parent_(g.ops().size()), reductions_(g.ops().size()) {
    std::iota(parent_.begin(), parent_.end(), 0);
    for (size_t o = 0; o < g.ops().size(); ++o) reductions_[o] = is_reduction(g.ops()[o].kind);
  }
  int root(int o) {
    while (parent_[o] != o) o = parent_[o] = parent_[parent_[o]];
    return o;
  }
  bool try_merge(int a, int b) {
    a = root(a);
    b = root(b);
    if (a == b) return true;
    if (reductions_[a] + reductions_[b] > 1) return false;
    if (b < a) std::swap(a, b);
    parent_[b] = a;
    reductions_[a] += reductions_[b];
    return true;
  }

 private:
  std::vector<int> parent_;
  std::vector<int> reductions_;
};

std::vector<int> fusion_roots(const KernelGraph& g) {
  const std::vector<Op>& ops = g.ops();
  std::vector<int> consumers(g.tensors().size(), 0);
  std::vector<bool> is_output(g.tensors().size(), false);
  for (int t : g.output_ids()) is_output[t] = true;
  for (const Op& op : ops) {
    if (op.kind == OpKind::kOutput) continue;
    std::vector<int> distinct = op.inputs;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int t : distinct) ++consumers[t];
  }
  FusionGroups groups(g);
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (!is_fusible(op.kind)) continue;
    const Shape& result = g.tensor(op.outputs[0]).shape;
    for (int t : op.inputs) {
      const int p = g.tensor(t).producer;
      const OpKind pk = ops[p].kind;
      if (!is_fusible(pk) || consumers[t] != 1 || is_output[t]) continue;
      const bool edge_fuses =
          is_elementwise(op.kind) ? g.tensor(t).shape == result : is_elementwise(pk);
      if (edge_fuses) groups.try_merge(int(o), p);
    }
  }
  std::vector<int> roots(ops.size());
  for (size_t o = 0; o < ops.size(); ++o) roots[o] = groups.root(int(o));
  return roots;
}

KernelWork fusion_work(const KernelGraph& g, const std::vector<int>& roots, int root) {
  KernelWork w;
  w.kind = KernelKind::kLibraryFusion;
  std::vector<int> reads;
  std::string names;
  for (size_t o = 0; o < g.ops().size(); ++o) {
    if (roots[o] != root) continue;
    const Op& op = g.ops()[o];
    names += (names.empty() ? "" : ", ") + std::string(op_kind_name(op.kind));
    for (int t : op.inputs) {
      if (roots[g.tensor(t).producer] != root) reads.push_back(t);
    }
    w.flops += op_flops(g, op).total;
    if (is_elementwise(op.kind)) {
      w.cpu_extra_flops += tensor_elements(g.tensor(op.outputs[0]).shape) *
                           cpu_extra_element_flops(op.kind, /*generated=*/false);
    }
    // Written when it is a program output or an op outside the fusion reads it.
    const int t = op.outputs[0];
    bool escapes = false;
    for (size_t u = 0; u < g.ops().size(); ++u) {
      const Op& user = g.ops()[u];
      if (std::find(user.inputs.begin(), user.inputs.end(), t) == user.inputs.end()) continue;
      escapes |= user.kind == OpKind::kOutput || roots[u] != root;
    }
    if (escapes) w.bytes_written += tensor_bytes(g, t);
  }
  std::sort(reads.begin(), reads.end());
  reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
  for (int t : reads) w.bytes_read += tensor_bytes(g, t);
  w.label = "fusion(" + names + ")";
  return w;
}

KernelWork library_call_work(const KernelGraph& g, const Op& op) {
  KernelWork w;
  w.kind = KernelKind::kLibraryMatmul;
  w.label = std::string(op_kind_name(op.kind));
  for (int t : op.inputs) {
    w.bytes_read += tensor_bytes(g, t);
    if (dtype_bytes(g.tensor(t).dtype) == 2) w.bytes_16_bit_operands += tensor_bytes(g, t);
  }
  w.bytes_written = tensor_bytes(g, op.outputs[0]);
  const OpFlops f = op_flops(g, op);
  w.flops = f.total;
  w.low_precision_matmul_flops = f.low_precision_matmul;
  const Shape& result = g.tensor(op.outputs[0]).shape;
  if (op.kind == OpKind::kMatmul) w.matmul_rows = result[result.size() - 2];
  return w;
}

}  // namespace

std::vector<KernelWork> kernel_graph_work(const KernelGraph& g) {
  const std::vector<int> roots = fusion_roots(g);
  std::vector<KernelWork> kernels;
  for (size_t o = 0; o < g.ops().size(); ++o) {
    const Op& op = g.ops()[o];
    switch (op.kind) {
      case OpKind::kInput:
      case OpKind::kOutput: break;
      case OpKind::kCustomized: kernels.push_back(block_graph_work(*op.block_graph)); break;
      case OpKind::kMatmul:
      case OpKind::kConcat: kernels.push_back(library_call_work(g, op)); break;
      default:
        if (roots[o] == int(o)) kernels.push_back(fusion_work(g, roots, int(o)));
        break;
    }
  }
  return kernels;
}

double cut_row_bytes(const KernelGraph& g) {
  double total = 0;
  for (const KernelWork& w : kernel_graph_work(g)) total += w.cut_row_bytes;
  return total;
}

}  // namespace mj::cost
