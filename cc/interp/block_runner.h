#pragma once
// Literal execution of one block of a block graph (docs/ir-semantics.md, "Block graph"):
// invariant ops once, then the body for each for-loop iteration feeding the accumulators,
// then the epilogue, then the stores.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cc/interp/accumulators.h"
#include "cc/interp/dense_tensor.h"
#include "cc/interp/tensor_ops.h"
#include "cc/interp/tiles.h"
#include "cc/ir/error.h"
#include "cc/ir/graph.h"
#include "cc/ir/op_kind.h"

namespace mj::interp {

template <class D>
class BlockRunner {
 public:
  using V = typename D::Value;
  using Tile = DenseTensor<V>;

  // `inputs` are the kernel-level tensors, in the block graph's input order, already checked.
  BlockRunner(const ir::BlockGraph& bg, const std::vector<const Tile*>& inputs, const D& d)
      : bg_(bg), inputs_(inputs), d_(d) {}

  // Runs block `block` and stores its output tiles into `outputs` (indexed by output position).
  void run(const ir::Dim3& block, std::vector<Tile>& outputs) {
    tiles_.assign(bg_.tensors().size(), Tile{});
    const std::vector<ir::Op>& ops = bg_.ops();
    for (const ir::Op& op : ops) {
      if (produces(op, ir::Phase::kInvariant)) eval(op, block, 0);
    }
    std::map<size_t, ForLoopAccumulator<D>> accumulators;
    for (size_t k = 0; k < ops.size(); ++k) {
      if (ir::is_accumulator(ops[k].kind))
        accumulators.emplace(k, ForLoopAccumulator<D>(d_, ops[k]));
    }
    for (int iter = 0; iter < bg_.forloop_range(); ++iter) {
      for (const ir::Op& op : ops) {
        if (produces(op, ir::Phase::kBody)) eval(op, block, iter);
      }
      for (auto& [k, acc] : accumulators) {
        const ir::Op& op = ops[k];
        acc.add_iteration(tiles_[op.inputs.at(0)],
                          op.inputs.size() > 1 ? &tiles_[op.inputs[1]] : nullptr);
      }
    }
    for (size_t k = 0; k < ops.size(); ++k) {
      const ir::Op& op = ops[k];
      if (ir::is_accumulator(op.kind)) {
        set(op, accumulators.at(k).result());
      } else if (produces(op, ir::Phase::kEpilogue)) {
        eval(op, block, 0);
      }
    }
    for (const ir::Op& op : ops) {
      if (op.kind == ir::OpKind::kOutput) store(op, block, outputs);
    }
  }

 private:
  bool produces(const ir::Op& op, ir::Phase phase) const {
    return !op.outputs.empty() && !ir::is_accumulator(op.kind) &&
           bg_.tensor(op.outputs[0]).phase == phase;
  }

  // Evaluates a non-accumulator op that computes a tile; `iter` matters only for inputs.
  void eval(const ir::Op& op, const ir::Dim3& block, int iter) {
    if (op.kind == ir::OpKind::kInput) {
      const ir::Shape& tile_shape = bg_.tensor(op.outputs.at(0)).shape;
      set(op,
          cut_tile(*inputs_.at(op.io_index), tile_shape, input_tile_origin(bg_, op, block, iter)));
      return;
    }
    std::vector<const Tile*> args;
    for (int t : op.inputs) args.push_back(&tiles_[t]);
    set(op, eval_shared_op(d_, op, args));
  }

  void set(const ir::Op& op, Tile value) {
    const int t = op.outputs.at(0);
    const ir::Shape& declared = bg_.tensor(t).shape;
    if (value.shape != declared) {
      throw ir::IrError("interpret: block op " + std::string(ir::op_kind_name(op.kind)) +
                        " computed t" + std::to_string(t) + " with shape " +
                        ir::shape_str(value.shape) + " but the graph declares " +
                        ir::shape_str(declared));
    }
    tiles_[t] = std::move(value);
  }

  void store(const ir::Op& op, const ir::Dim3& block, std::vector<Tile>& outputs) {
    const int t = op.inputs.at(0);
    const Tile& tile = tiles_[t];
    store_tile(outputs.at(op.io_index), tile, output_tile_origin(bg_, op, tile.shape, block),
               "block output " + std::to_string(op.io_index) + " (t" + std::to_string(t) + ")");
  }

  const ir::BlockGraph& bg_;
  const std::vector<const Tile*>& inputs_;
  const D& d_;
  std::vector<Tile> tiles_;  // indexed by tensor id; this block's current values
};

}  // namespace mj::interp
