#include "cc/verify/shrink.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "cc/verify/rebuild.h"
#include "cc/verify/tied_dims.h"

namespace mj::verify {

using ir::BlockGraph;
using ir::Graph;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::ReduceKind;
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

namespace {

// The count op (of a graph whose block graph, if any, is bg) averages, or 0 for other ops.
int64_t averaged_count(const Graph& g, const BlockGraph* bg, const Op& op) {
  auto x = [&]() -> const Shape& { return g.tensor(op.inputs.at(0)).shape; };
  switch (op.kind) {
    case OpKind::kReduce: return op.reduce == ReduceKind::kMean ? x().at(op.dim) : 0;
    case OpKind::kRmsNorm: return x().back();
    case OpKind::kAccumMeanLast:
    case OpKind::kAccumRmsLast: return int64_t(bg->forloop_range()) * x().back();
    default: return 0;
  }
}

void add_counts(const Graph& full, const BlockGraph* full_bg, const Graph& shrunk,
                std::unordered_map<const Op*, int64_t>& counts) {
  if (full.ops().size() != shrunk.ops().size()) {
    throw std::logic_error("full_size_counts: the shrunk graph has other ops than the full one");
  }
  for (size_t k = 0; k < full.ops().size(); ++k) {
    const Op& f = full.ops()[k];
    const Op& s = shrunk.ops()[k];
    if (f.kind != s.kind) {
      throw std::logic_error("full_size_counts: op " + std::to_string(k) + " differs");
    }
    if (f.kind == OpKind::kCustomized) {
      add_counts(*f.block_graph, f.block_graph.get(), *s.block_graph, counts);
    } else if (const int64_t n = averaged_count(full, full_bg, f)) {
      counts[&s] = n;
    }
  }
}

}  // namespace

std::unordered_map<const Op*, int64_t> full_size_counts(const KernelGraph& full,
                                                        const KernelGraph& shrunk) {
  std::unordered_map<const Op*, int64_t> counts;
  add_counts(full, nullptr, shrunk, counts);
  return counts;
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
