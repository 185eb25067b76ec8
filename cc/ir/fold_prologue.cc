#include "cc/ir/fold_prologue.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"

namespace mj::ir {
namespace {

bool folds_kind(OpKind kind) {
  const OpClass cls = op_info(kind).cls;
  const bool computes = cls == OpClass::kUnary || cls == OpClass::kBinary ||
                        cls == OpClass::kReduce || cls == OpClass::kRmsNorm ||
                        cls == OpClass::kMatmul;
  return computes && legal_at_block_level(kind);
}

// For each dim of the folded input, the dim of a value in its prologue that the same tile
// split reads along (-1: none; that value is read whole there). Dims no entry names (a
// reduction's or a matmul's contraction) are whole in every tile, so each op sees what it
// needs of its inputs.
using DimMap = std::vector<int>;

// The dim map of an op's input `v` from the map `out` of its output. Inputs of lower rank
// align to the right (numpy broadcasting, a matmul's missing batch dims).
DimMap input_map(const Graph& g, const Op& op, int v, const DimMap& out) {
  const Shape& u = g.tensor(op.outputs[0]).shape;
  const Shape& in = g.tensor(v).shape;
  const int rank = int(u.size());
  const int offset = rank - int(in.size());  // u's dim e is the input's dim e - offset
  // The input's own dim for u's dim e, or -1 where the input lacks it or broadcasts along it.
  auto same = [&](int e) { return e >= offset && in[e - offset] == u[e] ? e - offset : -1; };
  DimMap m(out.size(), -1);
  for (size_t d = 0; d < out.size(); ++d) {
    const int e = out[d];
    if (e < 0) continue;
    switch (op_info(op.kind).cls) {
      case OpClass::kMatmul: {
        const bool is_a = v == op.inputs[0];
        if (e < rank - 2)
          m[d] = same(e);  // a batch dim
        else if (e == rank - 2)
          m[d] = is_a ? int(in.size()) - 2 : -1;  // rows: A's
        else
          m[d] = is_a ? -1 : int(in.size()) - 1;  // columns: B's
        break;
      }
      case OpClass::kReduce: m[d] = e == op.dim ? -1 : e; break;
      case OpClass::kRmsNorm: m[d] = e == rank - 1 ? -1 : e; break;
      default: m[d] = same(e); break;
    }
  }
  return m;
}

// A block input's map entry through a dim map: the value's dim that tile split reads along.
int through(const DimMap& m, int d) { return d >= 0 ? m[d] : -1; }

// The customized op's block graph with its inputs that kernel-level prologues compute
// computed on each tile from the prologues' sources, and the kernel tensors it now reads,
// in order.
struct Folded {
  std::shared_ptr<const BlockGraph> block_graph;
  std::vector<int> inputs;
};

class Folder {
 public:
  Folder(const KernelGraph& g, const BlockGraph& bg)
      : g_(g), folded_(std::make_shared<BlockGraph>(bg.grid(), bg.forloop_range())) {}

  // A tile of kernel tensor `t` read with these maps, once per maps.
  int read(int t, Dim3 imap, int fmap) {
    const auto key = std::make_tuple(t, imap, fmap);
    auto it = tiles_.find(key);
    if (it != tiles_.end()) return it->second;
    const Tensor& tensor = g_.tensor(t);
    const int tile = folded_->new_input(tensor.shape, tensor.dtype, imap, fmap);
    inputs_.push_back(t);
    return tiles_[key] = tile;
  }

  // Kernel tensor `u` on the tile that `input` (a block input op of the folded input) reads,
  // through dim map `m`: its producer's op again on its inputs' tiles when it folds, else a
  // tile of `u` itself.
  int value(int u, const Op& input, const DimMap& m) {
    const auto key = std::make_pair(u, m);
    auto it = values_.find(key);
    if (it != values_.end()) return it->second;
    const Op& op = g_.ops()[g_.tensor(u).producer];
    int v;
    if (folds_kind(op.kind) && !splits_norm(op, input, m)) {
      ++folded_ops_;
      std::vector<int> ins;
      for (int in : op.inputs) ins.push_back(value(in, input, input_map(g_, op, in, m)));
      v = append_op(*folded_, op, ins);
    } else {
      Dim3 imap;
      for (int a = 0; a < 3; ++a) imap[a] = through(m, input.imap[a]);
      v = read(u, imap, through(m, input.fmap));
    }
    return values_[key] = v;
  }

  std::shared_ptr<BlockGraph> folded_graph() const { return folded_; }
  int folded_ops() const { return folded_ops_; }
  const std::vector<int>& inputs() const { return inputs_; }

 private:
  const KernelGraph& g_;
  std::shared_ptr<BlockGraph> folded_;
  std::map<std::tuple<int, Dim3, int>, int> tiles_;
  std::map<std::pair<int, DimMap>, int> values_;
  std::vector<int> inputs_;
  int folded_ops_ = 0;

  // Whether the tile splits the dim an rms_norm normalizes along: its output is whole
  // there, so the tile's share of it is not an op of its input's tile.
  bool splits_norm(const Op& op, const Op& input, const DimMap& m) const {
    if (op_info(op.kind).cls != OpClass::kRmsNorm) return false;
    const int last = int(g_.tensor(op.outputs[0]).shape.size()) - 1;
    const BlockGraph& bg = *folded_;
    for (int a = 0; a < 3; ++a) {
      if (bg.grid()[a] > 1 && through(m, input.imap[a]) == last) return true;
    }
    return bg.forloop_range() > 1 && through(m, input.fmap) == last;
  }
};

std::optional<Folded> fold_into(const KernelGraph& g, const Op& customized) {
  const BlockGraph& bg = *customized.block_graph;
  const bool any = std::any_of(customized.inputs.begin(), customized.inputs.end(), [&](int t) {
    return folds_kind(g.ops()[g.tensor(t).producer].kind);
  });
  if (!any) return std::nullopt;
  Folder folder(g, bg);
  std::vector<int> id(bg.tensors().size(), -1);
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kInput) {
      const int t = customized.inputs[op.io_index];
      DimMap identity(g.tensor(t).shape.size());
      for (size_t d = 0; d < identity.size(); ++d) identity[d] = int(d);
      id[op.outputs[0]] = folder.value(t, op, identity);
    } else if (op.kind == OpKind::kOutput) {
      folder.folded_graph()->new_output(id.at(op.inputs[0]), op.omap,
                                        bg.kernel_output_dtype(op.io_index));
    } else {
      std::vector<int> ins;
      for (int in : op.inputs) ins.push_back(id.at(in));
      id[op.outputs[0]] = append_op(*folder.folded_graph(), op, ins);
    }
  }
  if (folder.folded_ops() == 0) return std::nullopt;
  return Folded{folder.folded_graph(), folder.inputs()};
}

}  // namespace

std::optional<KernelGraph> fold_prologues(const KernelGraph& g) {
  std::map<int, Folded> folds;  // by op index
  for (size_t i = 0; i < g.ops().size(); ++i) {
    const Op& op = g.ops()[i];
    if (op.kind != OpKind::kCustomized) continue;
    try {
      if (auto f = fold_into(g, op)) folds.emplace(int(i), std::move(*f));
    } catch (const IrError&) {
      // A folded block graph the IR's rules refuse (a tile that does not divide): this
      // kernel keeps its inputs as they are.
    }
  }
  if (folds.empty()) return std::nullopt;

  // The ops still read once the folded kernels read their sources instead.
  std::vector<bool> needed(g.tensors().size(), false), live(g.ops().size(), false);
  for (int i = int(g.ops().size()) - 1; i >= 0; --i) {
    const Op& op = g.ops()[i];
    const bool outputs_read =
        std::any_of(op.outputs.begin(), op.outputs.end(), [&](int t) { return needed[t]; });
    live[i] = op.kind == OpKind::kInput || op.kind == OpKind::kOutput || outputs_read;
    if (!live[i]) continue;
    auto f = folds.find(i);
    for (int t : f == folds.end() ? op.inputs : f->second.inputs) needed[t] = true;
  }

  KernelGraph out;
  std::vector<int> id(g.tensors().size(), -1);
  for (size_t i = 0; i < g.ops().size(); ++i) {
    if (!live[i]) continue;
    const Op& op = g.ops()[i];
    auto f = folds.find(int(i));
    if (f == folds.end()) {
      copy_kernel_op(g, op, out, id);
      continue;
    }
    std::vector<int> ins;
    for (int t : f->second.inputs) ins.push_back(id.at(t));
    const std::vector<int> outs = out.customized(ins, f->second.block_graph);
    for (size_t k = 0; k < outs.size(); ++k) id.at(op.outputs[k]) = outs[k];
  }
  return out;
}

}  // namespace mj::ir
