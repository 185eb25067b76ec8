#include "cc/codegen/cpu/kernel_plan.h"

#include <map>
#include <utility>

#include "cc/ir/error.h"
#include "cc/ir/op_kind.h"
#include "cc/ir/thread_fusion.h"
#include "cc/layout/cpu_tile_reads.h"

namespace mj::codegen::cpu {

using ir::BlockGraph;
using ir::DType;
using ir::IrError;
using ir::is_elementwise;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Shape;
using ir::Tensor;
using ir::thread_fusion_groups;

namespace {

constexpr int64_t kAlignFloats = 16;  // 64 bytes: one cache line, one AVX-512 vector

// Distinct consuming ops per tensor; a store counts, as in cc/ir/thread_fusion.cc.
std::vector<std::vector<int>> consumers_of(const BlockGraph& bg) {
  std::vector<std::vector<int>> consumers(bg.tensors().size());
  for (size_t o = 0; o < bg.ops().size(); ++o) {
    for (int t : bg.ops()[o].inputs) {
      if (consumers[t].empty() || consumers[t].back() != int(o)) consumers[t].push_back(int(o));
    }
  }
  return consumers;
}

// A matrix with no batch: every dim before the last two is 1. An input tile of that shape
// can be read in place as a strided matrix, its rows one whole kernel row apart.
bool is_single_matrix(const Shape& tile) {
  for (size_t d = 0; d + 2 < tile.size(); ++d) {
    if (tile[d] != 1) return false;
  }
  return tile.size() >= 2;
}

// Floats in one matrix (the last two dims) of a row-major tensor: the distance between
// consecutive matrices of a dense buffer, or of an in-place tile's kernel tensor.
int64_t dense_matrix_floats(const Shape& s) {
  if (s.empty()) return 1;
  return s.size() < 2 ? s.back() : s[s.size() - 2] * s.back();
}

// Rows of a streamed tile shorter than this many floats are read in short runs; blocks are
// grouped until their runs side by side reach it.
constexpr int64_t kShortRunFloats = 1024;
constexpr int64_t kMinTasks = 4;                   // to balance over the 2-core pool
constexpr int64_t kGroupArenaFloats = 128 * 1024;  // all arena slices of a group within L2

int64_t choose_block_group(const BlockGraph& bg, const KernelPlan& plan, int64_t arena_floats) {
  const int64_t gx = bg.grid()[0];
  if (gx <= 1) return 1;
  int64_t run = 0;  // the shortest run of a body input whose tiles sit side by side along x
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kInput || op.fmap < 0) continue;
    const int t = op.outputs.at(0);
    const Shape& tile = bg.tensor(t).shape;
    if (!plan.read_in_place[t] || op.imap[0] != int(tile.size()) - 1) continue;
    if (run == 0 || tile.back() < run) run = tile.back();
  }
  if (run == 0 || run >= kShortRunFloats) return 1;
  int64_t best = 1;
  for (int64_t g = 2; g <= gx; ++g) {
    if (gx % g == 0 && g * run <= kShortRunFloats && bg.num_blocks() / g >= kMinTasks &&
        g * arena_floats <= kGroupArenaFloats) {
      best = g;
    }
  }
  return best;
}

class Allocator {
 public:
  int64_t take(int64_t floats) {
    const int64_t at = next_;
    next_ += (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    return at;
  }
  int64_t total() const { return next_; }

 private:
  int64_t next_ = 0;
};

// A matmul over a k of 1 ([.., m, 1] @ [.., 1, n]) is the broadcast product of its
// operands, one element of each per result element, so a reduce can fold it like an
// elementwise chain (KernelPlan::reduce_prologue) when both operands are dense float tiles
// (not a strided or bfloat16 tile read in place for matmuls only). The search writes decode's
// P @ V that way: each key's probabilities times its value row, summed over the keys;
// computed as a product tile it was written whole to the arena and read back.
bool is_dense_outer_product(const BlockGraph& bg, const KernelPlan& plan, const Op& op) {
  if (op.kind != OpKind::kMatmul || bg.tensor(op.inputs.at(0)).shape.back() != 1) return false;
  for (int t : op.inputs) {
    const Op& producer = bg.ops()[bg.tensor(t).producer];
    const bool raw_bf16 = plan.read_in_place[t] && producer.kind == OpKind::kInput &&
                          bg.kernel_input_dtype(producer.io_index) != DType::kF32;
    const Shape& shape = bg.tensor(t).shape;
    if (raw_bf16 || plan.row_stride[t] != shape.back() ||
        plan.matrix_stride[t] != dense_matrix_floats(shape)) {
      return false;
    }
  }
  return true;
}

}  // namespace

int64_t element_count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string buffer_name(const KernelPlan& plan, int t) {
  const int owner = plan.buffer_of.at(t);
  if (owner < 0) {
    throw IrError("cpu codegen: t" + std::to_string(t) +
                  " lives only inside a fused pass but is read outside it");
  }
  return "t" + std::to_string(owner);
}

KernelPlan plan_kernel(const BlockGraph& bg) {
  const std::vector<Op>& ops = bg.ops();
  const std::vector<Tensor>& tensors = bg.tensors();
  const std::vector<std::vector<int>> consumers = consumers_of(bg);
  const std::vector<int> group = thread_fusion_groups(bg);

  KernelPlan plan;
  plan.pass_ending_at.assign(ops.size(), {});
  plan.buffer_of.assign(tensors.size(), -1);
  plan.arena_offset.assign(tensors.size(), -1);
  plan.read_in_place.assign(tensors.size(), false);
  plan.row_stride.assign(tensors.size(), 0);
  plan.matrix_stride.assign(tensors.size(), 0);
  plan.next_tile_offset.assign(tensors.size(), 0);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Shape& s = tensors[t].shape;
    plan.row_stride[t] = s.empty() ? 1 : s.back();
    plan.matrix_stride[t] = dense_matrix_floats(s);
  }
  plan.matmul_adds_into_accum.assign(ops.size(), false);
  plan.softmax_group_of.assign(ops.size(), -1);

  // Fusion groups are chains (each member but the last has the next as its only consumer),
  // so a pass is emitted where its last member stands and only that member is stored.
  std::map<int, std::vector<int>> members;
  for (size_t o = 0; o < ops.size(); ++o) {
    if (group[o] >= 0) members[group[o]].push_back(int(o));
  }
  for (auto& [head, chain] : members) {
    const int end_tensor = ops[chain.back()].outputs.at(0);
    for (int o : chain) {
      for (int t : ops[o].outputs) plan.buffer_of[t] = -1;
    }
    plan.buffer_of[end_tensor] = end_tensor;
    // A head that is not elementwise (matmul, reduce, an accumulator, ...) computes into the
    // pass's buffer, and the rest of the chain then runs in place over it.
    if (!is_elementwise(ops[head].kind) && chain.size() > 1) {
      plan.buffer_of[ops[head].outputs.at(0)] = end_tensor;
    }
    // Multi-output ops are never fused (only elementwise ops join), so their other outputs
    // keep their own buffers.
    for (int t : ops[chain.back()].outputs) plan.buffer_of[t] = t;
    plan.pass_ending_at[chain.back()] = chain;
  }

  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind != OpKind::kInput) continue;
    const int t = op.outputs.at(0);
    plan.buffer_of[t] = t;
    if (!layout::cpu_reads_in_place(bg, op)) continue;
    plan.read_in_place[t] = true;
    const Shape& kernel_shape = bg.kernel_input_shape(op.io_index);
    const bool one_run = bg.kernel_input_dtype(op.io_index) == DType::kF32 &&
                         layout::tile_is_contiguous(tensors[t].shape, kernel_shape);
    if (!one_run) {  // strided matrices
      plan.row_stride[t] = kernel_shape.back();
      plan.matrix_stride[t] = dense_matrix_floats(kernel_shape);
    }
  }

  // Online-softmax accumulators over the same s share one running max.
  std::map<int, int> group_of_score;
  for (size_t o = 0; o < ops.size(); ++o) {
    const OpKind k = ops[o].kind;
    if (k != OpKind::kAccumMaxLast && k != OpKind::kAccumExpSumLast &&
        k != OpKind::kAccumExpMatmul) {
      continue;
    }
    const int s = ops[o].inputs.at(0);
    auto [it, fresh] = group_of_score.emplace(s, int(plan.softmax_groups.size()));
    if (fresh) plan.softmax_groups.push_back(SoftmaxGroup{s, {}, 0, 0, 0});
    plan.softmax_groups[it->second].accum_ops.push_back(int(o));
    plan.softmax_group_of[o] = it->second;
  }

  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind != OpKind::kMatmul) continue;
    const int t = op.outputs.at(0);
    if (tensors[t].phase != Phase::kBody || consumers[t].size() != 1) continue;
    const Op& consumer = ops[consumers[t][0]];
    if (consumer.kind != OpKind::kAccumSum) continue;
    plan.matmul_adds_into_accum[o] = true;
    plan.buffer_of[t] = plan.buffer_of[consumer.outputs.at(0)];
  }

  plan.reduce_prologue.assign(ops.size(), {});
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind != OpKind::kReduce) continue;
    const int x = op.inputs.at(0);
    const Shape& x_shape = tensors[x].shape;
    const bool last_dim = op.dim + 1 == int(x_shape.size());
    if (x_shape[op.dim] == 1 || (last_dim && x_shape[op.dim] > kMaxStackRowFloats)) continue;
    const int producer = tensors[x].producer;
    std::vector<int>& pass = plan.pass_ending_at[producer];
    if (pass.empty() || consumers[x].size() != 1 ||
        tensors[x].phase != tensors[op.outputs.at(0)].phase) {
      continue;
    }
    bool elementwise = true;
    for (size_t i = 0; i < pass.size(); ++i) {
      elementwise &= is_elementwise(ops[pass[i]].kind) ||
                     (i == 0 && is_dense_outer_product(bg, plan, ops[pass[i]]));
    }
    if (!elementwise) continue;
    plan.reduce_prologue[o] = std::move(pass);
    pass.clear();
    plan.buffer_of[x] = -1;
  }

  Allocator arena;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (plan.buffer_of[t] != int(t) || plan.read_in_place[t]) continue;
    plan.arena_offset[t] = arena.take(element_count(tensors[t].shape));
  }
  for (SoftmaxGroup& g : plan.softmax_groups) {
    const Shape& s = tensors[g.s].shape;
    const int64_t rows = element_count(s) / s.back();
    g.max_offset = arena.take(rows);
    g.scale_offset = arena.take(rows);
    g.probs_offset = arena.take(element_count(s));
  }
  plan.arena_floats = arena.total();
  plan.block_group = choose_block_group(bg, plan, plan.arena_floats);

  // The tile read next: the next block's in a group that moves along this input, else the
  // next iteration's.
  plan.next_iteration_offset.assign(tensors.size(), 0);
  plan.next_copy_offset.assign(tensors.size(), 0);
  for (const Op& op : ops) {
    const int t = op.kind == OpKind::kInput ? op.outputs.at(0) : -1;
    if (t < 0 || op.fmap < 0) continue;
    const Shape& kernel_shape = bg.kernel_input_shape(op.io_index);
    auto offset_along = [&](int dim) {
      int64_t stride = 1;
      for (size_t d = dim + 1; d < kernel_shape.size(); ++d) stride *= kernel_shape[d];
      return tensors[t].shape[dim] * stride;
    };
    if (!plan.read_in_place[t]) {
      if (bg.forloop_range() > 1) plan.next_copy_offset[t] = offset_along(op.fmap);
      continue;
    }
    plan.next_iteration_offset[t] = offset_along(op.fmap);
    const bool moves_with_group = plan.block_group > 1 && op.imap[0] >= 0;
    plan.next_tile_offset[t] = offset_along(moves_with_group ? op.imap[0] : op.fmap);
  }

  plan.group_matmul.assign(ops.size(), false);
  if (plan.block_group > 1) {
    // Tensors equal in all blocks of a group: those computed only from tiles that do not
    // depend on the block's x index.
    std::vector<bool> x_invariant(tensors.size(), false);
    for (const Op& op : ops) {
      bool invariant = op.kind == OpKind::kInput ? op.imap[0] < 0 : !op.inputs.empty();
      for (int t : op.inputs) invariant = invariant && x_invariant[t];
      for (int t : op.outputs) x_invariant[t] = invariant;
    }
    for (size_t o = 0; o < ops.size(); ++o) {
      const Op& op = ops[o];
      if (!plan.matmul_adds_into_accum[o]) continue;
      const int a = op.inputs.at(0), b = op.inputs.at(1);
      const Op& b_input = ops[tensors[b].producer];
      // B tiles side by side: an input split over x along its last dim, read in place.
      const bool b_side_by_side = b_input.kind == OpKind::kInput && plan.read_in_place[b] &&
                                  b_input.imap[0] == int(tensors[b].shape.size()) - 1;
      plan.group_matmul[o] = x_invariant[a] && b_side_by_side &&
                             is_single_matrix(tensors[a].shape) &&
                             is_single_matrix(tensors[b].shape);
    }
  }
  return plan;
}

}  // namespace mj::codegen::cpu
