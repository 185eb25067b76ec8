#include "cc/codegen/cuda/cuda_plan.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <numeric>

#include "cc/ir/error.h"
#include "cc/ir/op_kind.h"
#include "cc/ir/thread_fusion.h"

namespace mj::codegen::cuda {

using ir::BlockGraph;
using ir::IrError;
using ir::is_elementwise;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Shape;
using ir::Tensor;
using ir::thread_fusion_groups;

namespace {

constexpr int64_t kAlignBytes = 16;  // cp.async's widest copy, and float4 accesses

int64_t align_up(int64_t v) { return (v + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// The widest cp.async (16, 8 or 4 bytes) that every row of the input tile is aligned to, in
// the kernel tensor and in the dense shared tile, given a kernel tensor aligned to 16 bytes:
// the gcd of the row length and of every offset a row start is a multiple of.
int copy_bytes_for(const BlockGraph& bg, const Op& input) {
  const Shape& tile = bg.tensor(input.outputs.at(0)).shape;
  const Shape& whole = bg.kernel_input_shape(input.io_index);
  const std::vector<int64_t> strides = dense_strides(whole);
  int64_t g = tile.back();
  for (size_t d = 0; d + 1 < tile.size(); ++d) {
    if (tile[d] > 1) g = std::gcd(g, strides[d]);
  }
  for (int a = 0; a < 3; ++a) {
    const int d = input.imap[a];
    if (bg.grid()[a] > 1 && d >= 0) g = std::gcd(g, whole[d] / bg.grid()[a] * strides[d]);
  }
  if (input.fmap >= 0) g = std::gcd(g, tile[input.fmap] * strides[input.fmap]);
  const int64_t bytes = g * dtype_bytes(bg.kernel_input_dtype(input.io_index));
  for (int width : {16, 8, 4}) {
    if (bytes % width == 0) return width;
  }
  return 0;
}

void plan_passes(const BlockGraph& bg, CudaPlan& plan) {
  const std::vector<int> group = thread_fusion_groups(bg);
  std::map<int, std::vector<int>> members;  // group id -> ops in op order
  for (size_t o = 0; o < group.size(); ++o) {
    if (group[o] >= 0) members[group[o]].push_back(int(o));
  }
  plan.pass_ending_at.assign(bg.ops().size(), {});
  for (auto& [id, ops] : members) plan.pass_ending_at[ops.back()] = ops;
}

void plan_softmax_groups(const BlockGraph& bg, CudaPlan& plan) {
  plan.softmax_group_of.assign(bg.ops().size(), -1);
  std::map<int, int> group_of_score;
  for (size_t o = 0; o < bg.ops().size(); ++o) {
    const Op& op = bg.ops()[o];
    if (op.kind != OpKind::kAccumMaxLast && op.kind != OpKind::kAccumExpSumLast &&
        op.kind != OpKind::kAccumExpMatmul) {
      continue;
    }
    const int s = op.inputs.at(0);
    auto [it, fresh] = group_of_score.emplace(s, int(plan.softmax_groups.size()));
    if (fresh) plan.softmax_groups.push_back(SoftmaxGroup{s, {}, 0, 0, 0});
    plan.softmax_groups[it->second].accum_ops.push_back(int(o));
    plan.softmax_group_of[o] = it->second;
  }
}

void plan_matmuls_into_accumulators(const BlockGraph& bg, CudaPlan& plan) {
  const std::vector<Op>& ops = bg.ops();
  std::vector<std::vector<int>> consumers(bg.tensors().size());  // a store counts
  for (size_t o = 0; o < ops.size(); ++o) {
    for (int t : ops[o].inputs) {
      if (consumers[t].empty() || consumers[t].back() != int(o)) consumers[t].push_back(int(o));
    }
  }
  plan.matmul_adds_into.assign(ops.size(), -1);
  for (size_t o = 0; o < ops.size(); ++o) {
    if (ops[o].kind != OpKind::kMatmul) continue;
    const int t = ops[o].outputs.at(0);
    if (bg.tensor(t).phase != Phase::kBody || consumers[t].size() != 1) continue;
    const Op& consumer = ops[consumers[t][0]];
    if (consumer.kind == OpKind::kAccumSum) plan.matmul_adds_into[o] = consumer.outputs.at(0);
  }
}

// Where each tensor lives, before any input tile is demoted to global memory.
void plan_storage(const BlockGraph& bg, CudaPlan& plan) {
  const std::vector<Op>& ops = bg.ops();
  plan.tiles.assign(bg.tensors().size(), TilePlan{});
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind == OpKind::kOutput) continue;
    const int t = op.outputs.at(0);
    TilePlan& tile = plan.tiles[t];
    const int64_t n = element_count(bg.tensor(t).shape);
    if (op.kind == OpKind::kInput) {
      tile.storage = Storage::kShared;
      tile.element = bg.kernel_input_dtype(op.io_index);
      // Padded to 16 bytes, so a second stage starts as aligned as the first.
      tile.bytes = align_up(n * dtype_bytes(tile.element));
      tile.stages = op.fmap >= 0 && bg.forloop_range() > 1 ? 2 : 1;
      tile.copy_bytes = copy_bytes_for(bg, op);
    } else if (op.kind == OpKind::kConcat) {
      tile.storage = Storage::kView;
    } else if (((is_elementwise(op.kind) || op.kind == OpKind::kMatmul) &&
                plan.pass_ending_at[o].empty()) ||
               plan.matmul_adds_into[o] >= 0) {
      // Inside a pass (a matmul heading one hands each result to the chain in registers),
      // or a product added straight into its accumulator.
      tile.storage = Storage::kRegister;
    } else {
      // Pass ends, matmul / reduce / rms_norm results and accumulators (whose running value
      // lives here across iterations).
      tile.storage = Storage::kShared;
      tile.bytes = n * 4;
    }
  }
}

// Lays out every kShared tile and the softmax scratch; returns the total bytes.
int64_t lay_out(const BlockGraph& bg, CudaPlan& plan) {
  int64_t next = 0;
  auto take = [&](int64_t bytes) {
    const int64_t at = next;
    next += align_up(bytes);
    return at;
  };
  for (TilePlan& tile : plan.tiles) {
    tile.offset = tile.storage == Storage::kShared ? take(tile.bytes * tile.stages) : -1;
  }
  for (SoftmaxGroup& g : plan.softmax_groups) {
    const Shape& s = bg.tensor(g.s).shape;
    const int64_t rows = element_count(s) / s.back();
    g.max_offset = take(rows * 4);
    g.scale_offset = take(rows * 4);
    g.probs_offset = take(element_count(s) * 4);
  }
  return next;
}

std::string kib(int64_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string((bytes + 1023) / 1024) + " KiB)";
}

}  // namespace

int64_t element_count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

int64_t shared_memory_limit(const std::string& arch) {
  // cudaDevAttrMaxSharedMemoryPerBlockOptin of each compute capability (CUDA C Programming
  // Guide, "Technical Specifications per Compute Capability"), minus nothing: the kernel
  // declares no static shared memory.
  const int cc = std::atoi(arch.c_str());
  if (cc == 80 || cc == 87) return 163 * 1024;
  if (cc == 90 || cc == 100 || cc == 101 || cc == 103 || cc == 110) return 227 * 1024;
  return 99 * 1024;  // 86, 89, 120, 121 and anything unknown
}

CudaPlan plan_cuda_kernel(const BlockGraph& bg, int64_t smem_limit) {
  // CUDA grids allow 2^31 - 1 blocks along x but only 65535 along y and z.
  for (int a = 1; a < 3; ++a) {
    if (bg.grid()[a] > 65535) {
      throw IrError("cuda codegen: grid " + std::string(a == 1 ? "y" : "z") + " of " +
                    std::to_string(bg.grid()[a]) + " blocks is over CUDA's limit of 65535");
    }
  }
  CudaPlan plan;
  plan.smem_limit = smem_limit;
  plan_passes(bg, plan);
  plan_softmax_groups(bg, plan);
  plan_matmuls_into_accumulators(bg, plan);
  plan_storage(bg, plan);
  int64_t largest = 1;
  for (const Tensor& t : bg.tensors()) largest = std::max(largest, element_count(t.shape));
  // Small tiles leave half of 256 threads idle in every pass; 128 keeps 4 warps busy.
  plan.threads = largest <= 2048 ? 128 : 256;

  int64_t bytes = lay_out(bg, plan);
  while (bytes > smem_limit) {
    int victim = -1;
    for (const Op& op : bg.ops()) {
      if (op.kind != OpKind::kInput) continue;
      const int t = op.outputs.at(0);
      const TilePlan& tile = plan.tiles[t];
      if (tile.storage != Storage::kShared) continue;
      if (victim < 0 ||
          tile.bytes * tile.stages > plan.tiles[victim].bytes * plan.tiles[victim].stages) {
        victim = t;
      }
    }
    if (victim >= 0 && plan.tiles[victim].stages > 1) {
      // Give up the overlap of this tile's loads with compute before its staging.
      plan.tiles[victim].stages = 1;
      bytes = lay_out(bg, plan);
      continue;
    }
    if (victim < 0) {
      throw IrError("cuda codegen: the block graph needs " + kib(bytes) +
                    " of shared memory per block for its computed tiles (with every input "
                    "tile read from global memory), more than the target's limit of " +
                    kib(smem_limit) + "; choose smaller tiles (a larger grid or forloop_range)");
    }
    plan.tiles[victim].storage = Storage::kGlobal;
    bytes = lay_out(bg, plan);
  }
  plan.smem_bytes = bytes;
  return plan;
}

}  // namespace mj::codegen::cuda
