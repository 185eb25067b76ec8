#include "cc/verify/shrink.h"

#include <algorithm>
#include <limits>

#include "cc/verify/rebuild.h"
#include "cc/verify/tied_dims.h"

namespace mj::verify {

using ir::BlockGraph;
using ir::Graph;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::Shape;

namespace {

Shape shrunk_shape(const Graph& g, const TensorSlots& slots, const std::vector<int64_t>& sizes,
                   int t) {
  Shape s(g.tensor(t).shape.size());
  for (int d = 0; d < int(s.size()); ++d) s[d] = sizes.at(slots.slot(t, d));
  return s;
}

KernelGraph shrink_one(const KernelGraph& g, const GraphDims& dims,
                       const std::vector<int64_t>& sizes) {
  return rebuild_with_shapes(g, [&](int block_op, int t) {
    if (block_op < 0) return shrunk_shape(g, dims.kernel, sizes, t);
    return shrunk_shape(*g.ops().at(block_op).block_graph, dims.blocks.at(block_op), sizes, t);
  });
}

constexpr int64_t kSizeCap = int64_t(1) << 62;

int64_t sat_add(int64_t a, int64_t b) { return std::min(kSizeCap, a + b); }
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kSizeCap / b ? kSizeCap : a * b;
}

int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n = sat_mul(n, d);
  return n;
}

// Values computed by the ops of g (a kernel graph or one block's tiles), customized ops
// excluded.
int64_t op_values(const Graph& g, const Op& op) {
  int64_t n = 0;
  for (int t : op.outputs) n = sat_add(n, elements(g.tensor(t).shape));
  if (op.kind == OpKind::kMatmul || op.kind == OpKind::kAccumExpMatmul) {
    const Shape& a = g.tensor(op.inputs.at(0)).shape;
    n = sat_add(n, sat_mul(elements(g.tensor(op.outputs.at(0)).shape), a.back()));
  }
  return n;
}

}  // namespace

std::pair<KernelGraph, KernelGraph> shrink_pair(const KernelGraph& a, const KernelGraph& b,
                                                int max_tile) {
  const TiedDims tied = tie_dims(a, b);
  const std::vector<int64_t> sizes = tied.classes.shrunk_sizes(max_tile);
  return {shrink_one(a, tied.a, sizes), shrink_one(b, tied.b, sizes)};
}

int64_t instance_size(const KernelGraph& g) {
  int64_t n = 0;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::kCustomized) {
      n = sat_add(n, op_values(g, op));
      continue;
    }
    const BlockGraph& bg = *op.block_graph;
    int64_t per_block = 0;
    for (const Op& bop : bg.ops()) per_block = sat_add(per_block, op_values(bg, bop));
    n = sat_add(n, sat_mul(sat_mul(per_block, bg.num_blocks()), bg.forloop_range()));
  }
  return n;
}

}  // namespace mj::verify
