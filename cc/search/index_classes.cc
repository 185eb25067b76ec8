#include "cc/search/index_classes.h"

#include <numeric>
#include <set>

namespace mj::search {

using ir::Graph;
using ir::is_binary_elementwise;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::ReduceKind;
using ir::Shape;
using ir::Tensor;

int ClassTable::fresh(int64_t size) {
  sizes_.push_back(size);
  return int(sizes_.size()) - 1;
}

int ClassTable::concat_of(int a, int b) {
  auto [it, added] = concat_.try_emplace({a, b}, 0);
  if (added) {
    const int64_t sa = a == kUnitClass ? 1 : size(a), sb = b == kUnitClass ? 1 : size(b);
    it->second = fresh(sa + sb);
  }
  return it->second;
}

int ClassTable::stacked_of(int tile, int axis, int parts) {
  auto [it, added] = stacked_.try_emplace({tile, axis, parts}, 0);
  if (!added) return it->second;
  it->second = fresh((tile == kUnitClass ? 1 : size(tile)) * parts);
  auto [chunk, new_chunk] = chunks_.try_emplace({axis, parts}, 0);
  if (new_chunk) chunk->second = fresh(parts);
  stackings_[it->second] = Stacking{tile, chunk->second, parts};
  return it->second;
}

const ClassTable::Stacking* ClassTable::stacking(int c) const {
  auto it = stackings_.find(c);
  return it == stackings_.end() ? nullptr : &it->second;
}

namespace {

// Union-find over the dims of the target's tensors.
struct DimSlots {
  std::vector<int> first;  // slot of dim 0 of each tensor
  std::vector<int> parent;
  std::vector<int64_t> size;

  int slot(int t, int d) const { return first[t] + d; }
  int find(int s) {
    while (parent[s] != s) s = parent[s] = parent[parent[s]];
    return s;
  }
  void unite(int a, int b) { parent[find(a)] = find(b); }
};

// Unites dim da of tensor a with dim db of tensor b unless either is a broadcast size-1 dim.
void tie(DimSlots& s, const Graph& g, int a, int da, int b, int db) {
  if (g.tensor(a).shape[da] == 1 || g.tensor(b).shape[db] == 1) return;
  s.unite(s.slot(a, da), s.slot(b, db));
}

// Right-aligned dims of x tied to the result's (numpy broadcasting, batch dims of matmul).
void tie_aligned(DimSlots& s, const Graph& g, int x, int out, int trailing_skip) {
  const int rx = int(g.tensor(x).shape.size()) - trailing_skip;
  const int ro = int(g.tensor(out).shape.size()) - trailing_skip;
  for (int i = 1; i <= rx; ++i) tie(s, g, x, rx - i, out, ro - i);
}

}  // namespace

TargetClasses target_classes(const KernelGraph& target) {
  DimSlots s;
  for (const Tensor& t : target.tensors()) {
    s.first.push_back(int(s.size.size()));
    for (int64_t d : t.shape) {
      s.parent.push_back(int(s.size.size()));
      s.size.push_back(d);
    }
  }
  for (const Op& op : target.ops()) {
    if (op.outputs.empty()) continue;
    const int out = op.outputs[0];
    const int rank = int(target.tensor(out).shape.size());
    switch (op.kind) {
      case OpKind::kInput: break;
      case OpKind::kMatmul: {
        const int a = op.inputs[0], b = op.inputs[1];
        const int ra = int(target.tensor(a).shape.size());
        const int rb = int(target.tensor(b).shape.size());
        tie(s, target, a, ra - 1, b, rb - 2);
        tie(s, target, a, ra - 2, out, rank - 2);
        tie(s, target, b, rb - 1, out, rank - 1);
        tie_aligned(s, target, a, out, 2);
        tie_aligned(s, target, b, out, 2);
        break;
      }
      case OpKind::kReduce:
      case OpKind::kConcat:
        for (int d = 0; d < rank; ++d) {
          for (int x : op.inputs) {
            if (d != op.dim) tie(s, target, x, d, out, d);
          }
        }
        break;
      default:  // elementwise and rms_norm keep their (broadcast) operands' dims
        for (int x : op.inputs) tie_aligned(s, target, x, out, 0);
        break;
    }
  }
  TargetClasses tc;
  std::map<int, int> class_of_root;
  auto classes_of = [&](int t) {
    DimClasses c;
    const Shape& shape = target.tensor(t).shape;
    for (int d = 0; d < int(shape.size()); ++d) {
      if (shape[d] == 1) {
        c.push_back(kUnitClass);
        continue;
      }
      const int root = s.find(s.slot(t, d));
      auto [it, added] = class_of_root.try_emplace(root, 0);
      if (added) it->second = tc.table.fresh(shape[d]);
      c.push_back(it->second);
    }
    return c;
  };
  for (int t : target.input_ids()) tc.inputs.push_back(classes_of(t));
  for (int t : target.output_ids()) tc.outputs.push_back(classes_of(t));
  std::set<int> combinable;
  std::vector<int> stack(target.output_ids().begin(), target.output_ids().end());
  std::vector<bool> seen(target.tensors().size(), false);
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    if (seen[t]) continue;
    seen[t] = true;
    const Op& op = target.ops()[target.tensor(t).producer];
    int summed = kUnitClass;
    if (op.kind == OpKind::kMatmul) {
      summed = classes_of(op.inputs[0]).back();
    } else if (op.kind == OpKind::kReduce && op.reduce != ReduceKind::kMax) {
      summed = classes_of(op.inputs[0])[op.dim];
    } else if (!(is_binary_elementwise(op.kind) || op.kind == OpKind::kNeg ||
                 op.kind == OpKind::kMulScalar)) {
      continue;  // an input, or a nonlinear op: nothing below it is combinable
    }
    if (summed != kUnitClass) combinable.insert(summed);
    for (int x : op.inputs) stack.push_back(x);
  }
  tc.combinable.assign(combinable.begin(), combinable.end());
  for (const Op& op : target.ops()) {
    if (op.kind != OpKind::kReduce || op.reduce != ReduceKind::kMax) continue;
    const int c = classes_of(op.inputs[0])[op.dim];
    if (c != kUnitClass) tc.max_reduced.push_back(c);
  }
  return tc;
}

namespace {

// The class shared by two aligned dims, kUnitClass when both are units, nullopt when they
// index different things.
std::optional<int> merge(int a, int b) {
  if (a == kUnitClass) return b;
  if (b == kUnitClass || a == b) return a;
  return std::nullopt;
}

// The class of dim i counted from the right (1 = last), or a unit when x has no such dim.
int from_right(const DimClasses& x, int i) {
  return i <= int(x.size()) ? x[x.size() - i] : kUnitClass;
}

std::optional<DimClasses> broadcast(const DimClasses& a, const DimClasses& b, int rank,
                                    int trailing_skip) {
  DimClasses out(rank, kUnitClass);
  for (int i = 1 + trailing_skip; i <= rank; ++i) {
    auto m = merge(from_right(a, i), from_right(b, i));
    if (!m) return std::nullopt;
    out[rank - i] = *m;
  }
  return out;
}

}  // namespace

std::optional<DimClasses> propagate_classes(const Op& op, const std::vector<DimClasses>& in,
                                            const Shape& out_shape, ClassTable* table) {
  const int rank = int(out_shape.size());
  DimClasses out;
  switch (op.kind) {
    case OpKind::kMatmul:
    case OpKind::kAccumExpMatmul: {
      const DimClasses& a = in[0];
      const DimClasses& b = in[1];
      if (!merge(a[a.size() - 1], b[b.size() - 2])) return std::nullopt;
      auto batch = broadcast(a, b, rank, 2);
      if (!batch) return std::nullopt;
      out = *batch;
      out[rank - 2] = a[a.size() - 2];
      out[rank - 1] = b[b.size() - 1];
      return out;
    }
    case OpKind::kReduce:
      out = in[0];
      out[op.dim] = kUnitClass;
      return out;
    case OpKind::kConcat: {
      for (int d = 0; d < rank; ++d) {
        if (d != op.dim && in[0][d] != in[1][d]) return std::nullopt;
      }
      out = in[0];
      out[op.dim] = table->concat_of(in[0][op.dim], in[1][op.dim]);
      return out;
    }
    default: break;
  }
  if (ir::op_info(op.kind).cls == ir::OpClass::kAccumLast) {
    out = in[0];
    out.back() = kUnitClass;
    return out;
  }
  if (in.size() == 2) return broadcast(in[0], in[1], rank, 0);
  return in.at(0);
}

}  // namespace mj::search
