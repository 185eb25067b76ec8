#include "cc/codegen/cuda/cuda_plan.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <numeric>

#include "cc/ir/error.h"
#include "cc/ir/op_kind.h"
#include "cc/ir/thread_fusion.h"

namespace mj::codegen::cuda {

using ir::BlockGraph;
using ir::DType;
using ir::IrError;
using ir::is_accumulator;
using ir::is_elementwise;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Shape;
using ir::Tensor;
using ir::thread_fusion_groups;

namespace {

constexpr int64_t kAlignBytes = 16;  // cp.async's widest copy, ldmatrix rows, float4 accesses

// Registers per thread that persistent accumulators may take (of the 255 a thread can have
// at 256 threads a block, 128 on sm_80's 64K-register SMs with two blocks resident).
constexpr int kMaxAccumulatorRegisters = 64;
// Rows of online-softmax state (a max and its exp-sums, a register each) a warp may keep.
constexpr int kMaxSoftmaxRowsPerWarp = 16;

int64_t align_up(int64_t v) { return (v + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

bool is_16bit(DType d) { return d == DType::kBF16 || d == DType::kF16; }

std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

// The widest cp.async (16, 8 or 4 bytes) that every row of the input tile is aligned to, in
// the kernel tensor and in the shared tile, for a kernel tensor aligned to kBufferAlignBytes:
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
    if (width <= kBufferAlignBytes && bytes % width == 0) return width;
  }
  return 0;
}

// Rows whose length is a multiple of 32 bytes get 16 bytes of padding: 8 consecutive rows
// then start in 8 different 16-byte bank groups.
int64_t padded_pitch(const Shape& shape, DType element) {
  const int64_t last = shape.back();
  const int64_t row_bytes = last * dtype_bytes(element);
  if (element_count(shape) == last || row_bytes % 32 != 0) return last;
  return last + 16 / dtype_bytes(element);
}

int64_t shared_bytes(const Shape& shape, DType element, int64_t pitch) {
  return align_up(element_count(shape) / shape.back() * pitch * dtype_bytes(element));
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

// Per tensor: the ops reading it, each once (a store counts).
std::vector<std::vector<int>> consumers_of(const BlockGraph& bg) {
  const std::vector<Op>& ops = bg.ops();
  std::vector<std::vector<int>> consumers(bg.tensors().size());
  for (size_t o = 0; o < ops.size(); ++o) {
    for (int t : ops[o].inputs) {
      if (consumers[t].empty() || consumers[t].back() != int(o)) consumers[t].push_back(int(o));
    }
  }
  return consumers;
}

void plan_matmuls_into_accumulators(const BlockGraph& bg, CudaPlan& plan) {
  const std::vector<Op>& ops = bg.ops();
  const std::vector<std::vector<int>> consumers = consumers_of(bg);
  plan.matmul_adds_into.assign(ops.size(), -1);
  for (size_t o = 0; o < ops.size(); ++o) {
    if (ops[o].kind != OpKind::kMatmul) continue;
    const int t = ops[o].outputs.at(0);
    if (bg.tensor(t).phase != Phase::kBody || consumers[t].size() != 1) continue;
    const Op& consumer = ops[consumers[t][0]];
    if (consumer.kind == OpKind::kAccumSum) plan.matmul_adds_into[o] = consumer.outputs.at(0);
  }
}

// The operand dtypes of a matmul-like op as the product reads them: (A, B).
std::pair<DType, DType> operand_dtypes(const BlockGraph& bg, const Op& op) {
  return {bg.tensor(op.inputs.at(0)).dtype, bg.tensor(op.inputs.at(1)).dtype};
}

void plan_matmul_paths(const BlockGraph& bg, const CudaOptions& options, CudaPlan& plan) {
  plan.matmuls.assign(bg.ops().size(), MatmulPlan{});
  for (size_t o = 0; o < bg.ops().size(); ++o) {
    const Op& op = bg.ops()[o];
    if (op.kind != OpKind::kMatmul && op.kind != OpKind::kAccumExpMatmul) continue;
    const auto [a, b] = operand_dtypes(bg, op);
    MatmulPlan& mm = plan.matmuls[o];
    if (is_16bit(a) && a == b) {
      mm.path = MatmulPath::kMma16;
    } else if (options.allow_tf32) {
      mm.path = MatmulPath::kMmaTf32;
    }
  }
}

// Where each tensor lives, before any input tile is demoted to global memory.
void plan_storage(const BlockGraph& bg, CudaPlan& plan) {
  const std::vector<Op>& ops = bg.ops();
  const std::vector<std::vector<int>> consumers = consumers_of(bg);
  plan.tiles.assign(bg.tensors().size(), TilePlan{});
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind == OpKind::kOutput) continue;
    const int t = op.outputs.at(0);
    TilePlan& tile = plan.tiles[t];
    const Shape& shape = bg.tensor(t).shape;
    if (op.kind == OpKind::kInput) {
      tile.storage = Storage::kShared;
      tile.element = bg.kernel_input_dtype(op.io_index);
      tile.pitch = padded_pitch(shape, tile.element);
      tile.bytes = shared_bytes(shape, tile.element, tile.pitch);
      tile.stages = op.fmap >= 0 && bg.forloop_range() > 1
                        ? std::min(kMaxStages, bg.forloop_range())
                        : 1;  // capped at the iterations of one split below
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
      // Read only as a tensor-core operand: kept in the operand dtype, padded for ldmatrix.
      bool operand_only =
          !is_accumulator(op.kind) && is_16bit(bg.tensor(t).dtype) && !consumers[t].empty();
      for (int c : consumers[t]) {
        const Op& user = ops[c];
        operand_only &= (user.kind == OpKind::kMatmul ||
                         (user.kind == OpKind::kAccumExpMatmul && user.inputs.at(0) != t)) &&
                        plan.matmuls[c].path == MatmulPath::kMma16;
      }
      tile.element = operand_only ? bg.tensor(t).dtype : DType::kF32;
      tile.pitch = operand_only ? padded_pitch(shape, tile.element) : shape.back();
      tile.bytes = shared_bytes(shape, tile.element, tile.pitch);
    }
  }
}

// The exp(s - max) tile of each softmax group: 16-bit when every product of the group runs
// on 16-bit tensor cores (its A operand, rounded there anyway), else f32.
void plan_softmax_probs(const BlockGraph& bg, CudaPlan& plan) {
  for (SoftmaxGroup& g : plan.softmax_groups) {
    DType probs = DType::kF32;
    bool first = true;
    for (int o : g.accum_ops) {
      const Op& op = bg.ops()[o];
      if (op.kind != OpKind::kAccumExpMatmul) continue;
      const DType operand = bg.tensor(op.inputs.at(1)).dtype;
      const bool mma16 = plan.matmuls[o].path == MatmulPath::kMma16 && is_16bit(operand);
      if (!mma16 || (!first && probs != operand)) {
        probs = DType::kF32;
        break;
      }
      probs = operand;
      first = false;
    }
    g.probs = probs;
    g.probs_pitch = padded_pitch(bg.tensor(g.s).shape, probs);
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
    g.probs_offset = take(shared_bytes(s, g.probs, g.probs_pitch));
  }
  return next;
}

// ldmatrix reads rows of 16 bytes from 16-byte aligned addresses in shared memory.
bool ldmatrix_ok(const TilePlan& tile, DType element) {
  return tile.storage == Storage::kShared && tile.element == element &&
         tile.pitch * dtype_bytes(element) % 16 == 0;
}

// Which fragments come from ldmatrix, and the warp tile width, once storage is final.
void plan_fragments(const BlockGraph& bg, CudaPlan& plan) {
  const int warps = plan.threads / 32;
  for (size_t o = 0; o < bg.ops().size(); ++o) {
    const Op& op = bg.ops()[o];
    MatmulPlan& mm = plan.matmuls[o];
    if (mm.path == MatmulPath::kFma) continue;
    const Shape& b_shape = bg.tensor(op.inputs.at(1)).shape;
    const int64_t k = b_shape[b_shape.size() - 2], n = b_shape.back();
    const int64_t kstep = mm.path == MatmulPath::kMma16 ? 16 : 8;
    const DType a_dtype =
        mm.path == MatmulPath::kMma16 ? bg.tensor(op.inputs.at(0)).dtype : DType::kF32;
    bool a_ok = false;
    if (op.kind == OpKind::kAccumExpMatmul) {
      const SoftmaxGroup& g = plan.softmax_groups.at(plan.softmax_group_of.at(o));
      a_ok = g.probs == a_dtype && (mm.path == MatmulPath::kMmaTf32 || is_16bit(g.probs)) &&
             g.probs_pitch * dtype_bytes(g.probs) % 16 == 0;
      if (mm.path == MatmulPath::kMma16) a_ok &= g.probs == bg.tensor(op.inputs.at(1)).dtype;
    } else {
      const TilePlan& a = plan.tiles[op.inputs.at(0)];
      a_ok = ldmatrix_ok(a, a_dtype);
    }
    mm.ldmatrix_a = a_ok && k % kstep == 0;
    const TilePlan& b = plan.tiles[op.inputs.at(1)];
    mm.ldmatrix_b = mm.path == MatmulPath::kMma16 &&
                    ldmatrix_ok(b, bg.tensor(op.inputs.at(1)).dtype) && k % 16 == 0 && n % 8 == 0;
    // The widest warp tile that still gives every warp a tile.
    const Shape& c_shape = bg.tensor(op.outputs.at(0)).shape;
    const int64_t m = c_shape[c_shape.size() - 2];
    const int64_t batches = element_count(c_shape) / (m * n);
    const int64_t tiles16 = batches * ((m + 15) / 16);
    mm.n_tiles = 1;
    for (int nt : {4, 2}) {
      if (n % (8 * nt) == 0 && tiles16 * (n / (8 * nt)) >= warps) {
        mm.n_tiles = nt;
        break;
      }
    }
    mm.warp_tiles = tiles16 * ((n + 8 * mm.n_tiles - 1) / (8 * mm.n_tiles));
    mm.tiles_per_warp = int((mm.warp_tiles + warps - 1) / warps);
    const bool accumulates = op.kind == OpKind::kAccumExpMatmul || plan.matmul_adds_into[o] >= 0;
    mm.registers = accumulates && mm.tiles_per_warp * mm.n_tiles * 4 <= kMaxAccumulatorRegisters;
  }
}

// Split-K where it is sound and useful (cuda_plan.h, CudaPlan::split_k).
void plan_split_k(const BlockGraph& bg, const CudaOptions& options, CudaPlan& plan) {
  const int f = bg.forloop_range();
  const int64_t blocks = int64_t(bg.grid()[0]) * bg.grid()[1] * bg.grid()[2];
  if (f < 2 || !plan.softmax_groups.empty() || 2 * blocks > options.sm_count) return;
  int64_t floats = 0;
  for (const Op& op : bg.ops()) {
    if (!is_accumulator(op.kind)) continue;
    if (op.kind != OpKind::kAccumSum && op.kind != OpKind::kAccumSumLast &&
        op.kind != OpKind::kAccumMeanLast && op.kind != OpKind::kAccumRmsLast) {
      return;
    }
    floats += element_count(bg.tensor(op.outputs.at(0)).shape);
  }
  if (floats == 0) return;
  int split = 1;
  while (split * 2 <= kMaxSplitK && f % (split * 2) == 0 &&
         blocks * split * 2 <= options.sm_count && int64_t(bg.grid()[2]) * split * 2 <= 65535) {
    split *= 2;
  }
  plan.split_k = split;
  plan.workspace_floats = split > 1 ? floats : 0;
}

std::string kib(int64_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string((bytes + 1023) / 1024) + " KiB)";
}

void set_pipeline_depth(const BlockGraph& bg, CudaPlan& plan, int depth) {
  plan.pipeline_stages = depth;
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kInput) continue;
    TilePlan& tile = plan.tiles[op.outputs.at(0)];
    if (tile.storage == Storage::kShared && tile.stages > 1) tile.stages = depth;
  }
}

}  // namespace

int64_t element_count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool needs_wide_index(const Shape& kernel_shape) {
  return element_count(kernel_shape) > int64_t(INT_MAX);
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
  CudaOptions options;
  options.smem_limit = smem_limit;
  return plan_cuda_kernel(bg, options);
}

CudaPlan plan_cuda_kernel(const BlockGraph& bg, const CudaOptions& options) {
  // CUDA grids allow 2^31 - 1 blocks along x but only 65535 along y and z.
  for (int a = 1; a < 3; ++a) {
    if (bg.grid()[a] > 65535) {
      throw IrError("cuda codegen: grid " + std::string(a == 1 ? "y" : "z") + " of " +
                    std::to_string(bg.grid()[a]) + " blocks is over CUDA's limit of 65535");
    }
  }
  const int64_t smem_limit = options.smem_limit;
  CudaPlan plan;
  plan.smem_limit = smem_limit;
  plan_passes(bg, plan);
  plan_softmax_groups(bg, plan);
  plan_matmuls_into_accumulators(bg, plan);
  plan_matmul_paths(bg, options, plan);
  plan_storage(bg, plan);
  plan_softmax_probs(bg, plan);
  plan_split_k(bg, options, plan);
  int64_t largest = 1;
  for (const Tensor& t : bg.tensors()) largest = std::max(largest, element_count(t.shape));
  // Small tiles leave half of 256 threads idle in every pass; 128 keeps 4 warps busy.
  plan.threads = largest <= 2048 ? 128 : 256;

  int depth = 1;
  for (const TilePlan& tile : plan.tiles) depth = std::max(depth, tile.stages);
  const int iterations = bg.forloop_range() / plan.split_k;  // per block
  depth = std::min(depth, std::max(iterations, 1));
  if (depth < 2) {
    for (const Op& op : bg.ops()) {
      if (op.kind == OpKind::kInput && op.fmap >= 0) plan.tiles[op.outputs.at(0)].stages = 1;
    }
  }
  set_pipeline_depth(bg, plan, depth);
  int64_t bytes = lay_out(bg, plan);
  // Stages beyond double buffering only while they leave room for a second resident block.
  while (plan.pipeline_stages > 2 && bytes > smem_limit / 2) {
    set_pipeline_depth(bg, plan, plan.pipeline_stages - 1);
    bytes = lay_out(bg, plan);
  }
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
    plan.tiles[victim].pitch = bg.tensor(victim).shape.back();
    bytes = lay_out(bg, plan);
  }
  // A pipeline whose every tile fell back to one stage is no pipeline.
  int deepest = 1;
  for (const TilePlan& tile : plan.tiles) {
    if (tile.storage == Storage::kShared) deepest = std::max(deepest, tile.stages);
  }
  plan.pipeline_stages = deepest;
  plan.smem_bytes = bytes;
  plan_fragments(bg, plan);
  for (SoftmaxGroup& g : plan.softmax_groups) {
    const Shape& s = bg.tensor(g.s).shape;
    const int64_t rows = element_count(s) / s.back(), warps = plan.threads / 32;
    g.rows_per_warp = int((rows + warps - 1) / warps);
    g.registers = g.rows_per_warp <= kMaxSoftmaxRowsPerWarp;
  }
  return plan;
}

}  // namespace mj::codegen::cuda
