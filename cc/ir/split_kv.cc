#include "cc/ir/split_kv.h"

#include <memory>
#include <optional>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"

namespace mj::ir {
namespace {

// The tensors of a block graph that computes only accum_exp_matmul(s, V) /
// accum_exp_sum_last(s), and where it stores that.
struct OnlineSoftmax {
  int scores;
  int weighted;  // accum_exp_matmul(s, V)
  int sums;      // accum_exp_sum_last(s)
  Dim3 omap;
  DType dtype;
};

std::optional<OnlineSoftmax> online_softmax(const BlockGraph& bg) {
  if (bg.num_outputs() != 1 || bg.forloop_range() < 2) return std::nullopt;
  const auto producer = [&](int t) -> const Op& { return bg.ops()[bg.tensor(t).producer]; };
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kOutput) continue;
    const Op& div = producer(op.inputs[0]);
    if (div.kind != OpKind::kDiv) return std::nullopt;
    const Op& weighted = producer(div.inputs[0]);
    const Op& sums = producer(div.inputs[1]);
    if (weighted.kind != OpKind::kAccumExpMatmul || sums.kind != OpKind::kAccumExpSumLast ||
        weighted.inputs[0] != sums.inputs[0]) {
      return std::nullopt;
    }
    return OnlineSoftmax{sums.inputs[0], div.inputs[0], div.inputs[1], op.omap,
                         bg.kernel_output_dtype(op.io_index)};
  }
  return std::nullopt;
}

// The grid axis the split takes: the last one left at 1 (the paper's decode μGraph splits
// along z), or -1.
int free_axis(const BlockGraph& bg) {
  for (int a = 2; a >= 0; --a) {
    if (bg.grid()[a] == 1) return a;
  }
  return -1;
}

bool splittable(const BlockGraph& bg, const OnlineSoftmax& f, int axis) {
  const int last = int(bg.tensor(f.weighted).shape.size()) - 1;
  for (int a = 0; a < 3; ++a) {
    if (a != axis && f.omap[a] == last) return false;  // the slices' slots go there
  }
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kInput || op.fmap < 0) continue;
    for (int a = 0; a < 3; ++a) {
      if (a != axis && bg.grid()[a] > 1 && op.imap[a] == op.fmap) return false;
    }
  }
  return true;
}

// Kernel 1: bg on `splits` slices of the loop, storing the partials along the last dim.
std::shared_ptr<BlockGraph> partials_graph(const BlockGraph& bg, const OnlineSoftmax& f, int axis,
                                           int splits) {
  Dim3 grid = bg.grid();
  grid[axis] = splits;
  auto out = std::make_shared<BlockGraph>(grid, bg.forloop_range() / splits);
  // Only what the partials read: the one-kernel form's division would divide by each
  // slice's sum, which the verifier rejects (a divisor the program never divides by).
  std::vector<bool> live(bg.tensors().size(), false);
  live[f.weighted] = live[f.sums] = live[f.scores] = true;
  for (int i = int(bg.ops().size()) - 1; i >= 0; --i) {
    const Op& op = bg.ops()[i];
    if (op.kind == OpKind::kOutput || op.outputs.empty() || !live[op.outputs[0]]) continue;
    for (int in : op.inputs) live[in] = true;
  }
  std::vector<int> id(bg.tensors().size(), -1);
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kInput) {
      Dim3 imap = op.imap;
      imap[axis] = op.fmap;  // the loop's dim, sliced across the new axis (-1 stays whole)
      id[op.outputs[0]] = out->new_input(bg.kernel_input_shape(op.io_index),
                                         bg.kernel_input_dtype(op.io_index), imap, op.fmap);
    } else if (op.kind != OpKind::kOutput && live[op.outputs[0]]) {
      std::vector<int> ins;
      for (int in : op.inputs) ins.push_back(id.at(in));
      id[op.outputs[0]] = append_op(*out, op, ins);
    }
  }
  Dim3 omap = f.omap;
  omap[axis] = int(bg.tensor(f.weighted).shape.size()) - 1;
  const int max = out->accum(OpKind::kAccumMaxLast, id.at(f.scores));
  for (int t : {id.at(f.weighted), id.at(f.sums), max}) out->new_output(t, omap, DType::kF32);
  return out;
}

// Kernel 2: the slices' partials rescaled by exp(m_b - M), summed over a loop along the
// slots, and divided.
std::shared_ptr<BlockGraph> combine_graph(const KernelGraph& g, const BlockGraph& bg,
                                          const OnlineSoftmax& f, int axis, int splits,
                                          const std::vector<int>& parts, int top) {
  Dim3 grid = bg.grid();
  grid[axis] = 1;
  Dim3 imap = f.omap;
  imap[axis] = -1;
  auto out = std::make_shared<BlockGraph>(grid, splits);
  const int last = int(g.tensor(parts[0]).shape.size()) - 1;
  std::vector<int> tiles;
  for (int t : {parts[0], parts[1], parts[2]})
    tiles.push_back(out->new_input(g.tensor(t).shape, DType::kF32, imap, last));
  const int mx = out->new_input(g.tensor(top).shape, DType::kF32, imap, -1);
  const int w = out->unary(OpKind::kExp, out->binary(OpKind::kSub, tiles[2], mx));
  const int num = out->accum(OpKind::kAccumSum, out->binary(OpKind::kMul, w, tiles[0]));
  const int den = out->accum(OpKind::kAccumSum, out->binary(OpKind::kMul, w, tiles[1]));
  out->new_output(out->binary(OpKind::kDiv, num, den), imap, f.dtype);
  return out;
}

KernelGraph split_at(const KernelGraph& g, size_t at, const OnlineSoftmax& f, int axis,
                     int splits) {
  const Op& kernel = g.ops()[at];
  const BlockGraph& bg = *kernel.block_graph;
  KernelGraph out;
  std::vector<int> id(g.tensors().size(), -1);
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const Op& op = g.ops()[i];
    if (i != at) {
      copy_kernel_op(g, op, out, id);
      continue;
    }
    std::vector<int> ins;
    for (int t : op.inputs) ins.push_back(id.at(t));
    const std::vector<int> parts = out.customized(ins, partials_graph(bg, f, axis, splits));
    const int last = int(out.tensor(parts[2]).shape.size()) - 1;
    const int top = out.reduce(parts[2], last, ReduceKind::kMax);
    const std::vector<int> combined = out.customized(
        {parts[0], parts[1], parts[2], top}, combine_graph(out, bg, f, axis, splits, parts, top));
    id.at(op.outputs[0]) = combined[0];
  }
  return out;
}

}  // namespace

std::vector<KernelGraph> split_kv(const KernelGraph& g, const std::vector<int>& splits) {
  std::vector<KernelGraph> found;
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const Op& op = g.ops()[i];
    if (op.kind != OpKind::kCustomized) continue;
    const BlockGraph& bg = *op.block_graph;
    const auto f = online_softmax(bg);
    const int axis = free_axis(bg);
    if (!f || axis < 0 || !splittable(bg, *f, axis)) continue;
    for (int n : splits) {
      if (n < 2 || bg.forloop_range() % n) continue;
      try {
        found.push_back(split_at(g, i, *f, axis, n));
      } catch (const IrError&) {
        // A tile the IR refuses (a slice that does not divide a tensor): not this count.
      }
    }
    break;
  }
  return found;
}

}  // namespace mj::ir
