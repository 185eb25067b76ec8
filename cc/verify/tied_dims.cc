#include "cc/verify/tied_dims.h"

#include <algorithm>

namespace mj::verify {

using ir::BlockGraph;
using ir::Dim3;
using ir::Graph;
using ir::is_accumulator;
using ir::is_binary_elementwise;
using ir::is_unary_elementwise;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::Tensor;

namespace {

TensorSlots add_slots(DimClasses& dc, const Graph& g) {
  TensorSlots s;
  for (const Tensor& t : g.tensors()) {
    s.first.push_back(dc.num_slots());
    for (int64_t size : t.shape) dc.add_slot(size);
  }
  return s;
}

// Ties the dims that one op's shape rule relates, within one graph (kernel or block).
class RuleTies {
 public:
  RuleTies(DimClasses& dc, const Graph& g, const TensorSlots& s) : dc_(dc), g_(g), s_(s) {}

  int rank(int t) const { return int(g_.tensor(t).shape.size()); }
  int64_t size(int t, int d) const { return g_.tensor(t).shape.at(d); }
  void tie(int t, int dt, int u, int du) { dc_.unite(s_.slot(t, dt), s_.slot(u, du)); }

  // The last `count` dims of t and u, paired from the right.
  void tie_trailing(int t, int u, int count) {
    for (int i = 1; i <= count; ++i) tie(t, rank(t) - i, u, rank(u) - i);
  }

  // numpy broadcasting of x into out: right-aligned dims of equal size are the same dim; a
  // size-1 dim that stretches is not tied (it stays 1, its partner is free).
  void tie_broadcast(int x, int out, int skip_trailing) {
    const int rx = rank(x) - skip_trailing, ro = rank(out) - skip_trailing;
    for (int i = 1; i <= std::min(rx, ro); ++i) {
      if (size(x, rx - i) == size(out, ro - i)) tie(x, rx - i, out, ro - i);
    }
  }

  // [..., m, k] @ [..., k, n] -> [..., m, n]
  void tie_matmul(int a, int b, int out) {
    tie(a, rank(a) - 2, out, rank(out) - 2);
    tie(a, rank(a) - 1, b, rank(b) - 2);
    tie(b, rank(b) - 1, out, rank(out) - 1);
    tie_broadcast(a, out, 2);
    tie_broadcast(b, out, 2);
  }

  void tie_op(const Op& op) {
    if (op.outputs.empty()) return;
    const int out = op.outputs[0];
    if (is_unary_elementwise(op.kind) || op.kind == OpKind::kRmsNorm ||
        op.kind == OpKind::kAccumSum) {
      tie_trailing(op.inputs[0], out, rank(out));
    } else if (is_binary_elementwise(op.kind)) {
      tie_broadcast(op.inputs[0], out, 0);
      tie_broadcast(op.inputs[1], out, 0);
    } else if (op.kind == OpKind::kMatmul || op.kind == OpKind::kAccumExpMatmul) {
      tie_matmul(op.inputs[0], op.inputs[1], out);
    } else if (op.kind == OpKind::kReduce) {
      for (int d = 0; d < rank(out); ++d) {
        if (d != op.dim) tie(op.inputs[0], d, out, d);
      }
    } else if (op.kind == OpKind::kConcat) {
      // The concat dim too: a + b = out survives scaling all three by one ratio.
      tie_trailing(op.inputs[0], out, rank(out));
      tie_trailing(op.inputs[1], out, rank(out));
    } else if (is_accumulator(op.kind)) {
      // the *_last accumulators reduce the last dim to 1
      for (int d = 0; d + 1 < rank(out); ++d) tie(op.inputs[0], d, out, d);
    }
  }

 private:
  DimClasses& dc_;
  const Graph& g_;
  const TensorSlots& s_;
};

// Block input tiles and output tiles against the kernel tensors of the customized op.
void tie_block_boundary(DimClasses& dc, const KernelGraph& kg, const TensorSlots& ks,
                        const Op& custom, const BlockGraph& bg, const TensorSlots& bs) {
  const Dim3& grid = bg.grid();
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kInput) {
      const int tile = op.outputs.at(0), kt = custom.inputs.at(op.io_index);
      for (int d = 0; d < int(kg.tensor(kt).shape.size()); ++d) {
        dc.unite(bs.slot(tile, d), ks.slot(kt, d));
        int64_t split = op.fmap == d ? bg.forloop_range() : 1;
        for (int a = 0; a < 3; ++a) {
          if (op.imap[a] == d) split *= grid[a];
        }
        dc.require_multiple(ks.slot(kt, d), split);
      }
    } else if (op.kind == OpKind::kOutput) {
      const int tile = op.inputs.at(0), kt = custom.outputs.at(op.io_index);
      for (int d = 0; d < int(kg.tensor(kt).shape.size()); ++d) {
        dc.unite(bs.slot(tile, d), ks.slot(kt, d));
        int64_t split = 1;
        for (int a = 0; a < 3; ++a) {
          if (op.omap[a] == d) split *= grid[a];
        }
        dc.require_multiple(ks.slot(kt, d), split);
      }
    }
  }
}

GraphDims tie_graph(DimClasses& dc, const KernelGraph& g) {
  GraphDims dims;
  dims.kernel = add_slots(dc, g);
  RuleTies kernel(dc, g, dims.kernel);
  for (int k = 0; k < int(g.ops().size()); ++k) {
    const Op& op = g.ops()[k];
    if (op.kind != OpKind::kCustomized) {
      kernel.tie_op(op);
      continue;
    }
    const BlockGraph& bg = *op.block_graph;
    const TensorSlots& bs = dims.blocks[k] = add_slots(dc, bg);
    RuleTies block(dc, bg, bs);
    for (const Op& bop : bg.ops()) block.tie_op(bop);
    tie_block_boundary(dc, g, dims.kernel, op, bg, bs);
  }
  return dims;
}

void tie_pairwise(DimClasses& dc, const KernelGraph& a, const TensorSlots& sa,
                  const std::vector<int>& ta, const KernelGraph& b, const TensorSlots& sb,
                  const std::vector<int>& tb) {
  for (size_t i = 0; i < std::min(ta.size(), tb.size()); ++i) {
    const Shape& shape_a = a.tensor(ta[i]).shape;
    if (shape_a != b.tensor(tb[i]).shape) continue;  // the verifier rejects these first
    for (int d = 0; d < int(shape_a.size()); ++d) dc.unite(sa.slot(ta[i], d), sb.slot(tb[i], d));
  }
}

}  // namespace

TiedDims tie_dims(const KernelGraph& a, const KernelGraph& b) {
  TiedDims t;
  t.a = tie_graph(t.classes, a);
  t.b = tie_graph(t.classes, b);
  tie_pairwise(t.classes, a, t.a.kernel, a.input_ids(), b, t.b.kernel, b.input_ids());
  tie_pairwise(t.classes, a, t.a.kernel, a.output_ids(), b, t.b.kernel, b.output_ids());
  return t;
}

}  // namespace mj::verify
