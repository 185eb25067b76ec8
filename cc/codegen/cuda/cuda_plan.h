#pragma once
// What the CUDA generator decides about a block graph before it writes code: the fused
// elementwise passes (cc/ir/thread_fusion.h), where every tile lives (shared memory, read in
// place from the kernel tensor, or a view of other tiles) and in which dtype, the row pitch
// of shared tiles (padded against bank conflicts), the cp.async pipeline depth, how each
// matmul runs (tensor cores or FMA, fragments loaded with ldmatrix or element by element),
// the online-softmax groups, the threads per block, and the dynamic shared-memory layout,
// which is checked against the per-block limit here, before any compiler runs.
#include <cstdint>
#include <string>
#include <vector>

#include "cc/ir/graph.h"

namespace mj::codegen::cuda {

// The smallest alignment XLA gives any buffer it passes to a custom call (entry parameters;
// the buffers it allocates itself are aligned further). The widths of cp.async copies are
// planned from it, so every copy the plan chooses is aligned for every buffer XLA can pass;
// a buffer aligned less (only possible from outside XLA) takes the kernel's element-wise
// load path instead, decided per block at run time.
constexpr int kBufferAlignBytes = 16;

// The most stages a body input tile is staged in (cp.async pipeline depth).
constexpr int kMaxStages = 4;

enum class Storage : uint8_t {
  kRegister,  // lives only inside a fused pass (never read outside it)
  kShared,    // a row-major tile in dynamic shared memory (rows `pitch` elements apart)
  kGlobal,    // an input tile read in place from the kernel tensor (did not fit in shared)
  kView,      // concat: its reads go to its operands' tiles
};

struct TilePlan {
  Storage storage = Storage::kRegister;
  // Element type in shared memory: input tiles keep the kernel tensor's dtype (so cp.async
  // copies bytes unchanged and the tensor cores read 16-bit operands directly); a computed
  // tile read only as a tensor-core operand is stored in the operand's 16-bit dtype (the
  // rounding mma.sync would apply when it reads it); other computed tiles are f32.
  ir::DType element = ir::DType::kF32;
  // Elements from one row (the last dim) to the next in shared memory: the last dim, plus 16
  // bytes when the rows are a multiple of 32 bytes, so consecutive rows start in different
  // banks (8 rows of 16 bytes, what ldmatrix and a fragment row read at once, then cover all
  // 32 banks instead of 1 to 4 of them).
  int64_t pitch = 0;
  int64_t offset = -1;  // bytes into dynamic shared memory (kShared)
  int64_t bytes = 0;    // of one stage, padded to 16 bytes so every stage starts aligned
  int stages = 1;       // > 1: a body input tile pipelined across for-loop iterations
  // Input tiles: bytes one cp.async moves (16, 8 or 4), the widest that every row of the tile
  // is aligned to in both memories; 0 when rows are not 4-byte aligned (plain loads).
  int copy_bytes = 0;
};

// How a matmul op (or an accum_exp_matmul's product) runs.
enum class MatmulPath : uint8_t {
  kFma,      // one CUDA-core FMA per product: f32 operands at full precision
  kMma16,    // mma.sync.m16n8k16, bf16 or f16 operands, f32 accumulation
  kMmaTf32,  // mma.sync.m16n8k8 on operands rounded to TF32: f32 only when allowed
};

struct MatmulPlan {
  MatmulPath path = MatmulPath::kFma;
  // The fragments of A / B come from shared memory with ldmatrix (one instruction per 8x8
  // matrices of 16-bit elements) instead of one load per element.
  bool ldmatrix_a = false, ldmatrix_b = false;
  // Output tiles of 16 x (8 * n_tiles) per warp: A's fragment is loaded once for n_tiles
  // mma instructions.
  int n_tiles = 1;
  // Warp tiles of C, and how many each warp owns (tiles are dealt to warps round-robin).
  int64_t warp_tiles = 0;
  int tiles_per_warp = 0;
  // A product added into an accumulator every iteration keeps the accumulator in registers
  // (tiles_per_warp x n_tiles x 4 floats a thread) instead of reading and writing its tile.
  bool registers = false;
};

// The online-softmax accumulators over one score tensor share its running max, the per-row
// rescale factor and the tile of exp(s - max) (in `probs` dtype: the 16-bit dtype of the
// products' tensor-core operands when every product runs on tensor cores, else f32).
struct SoftmaxGroup {
  int s = -1;
  std::vector<int> accum_ops;                                  // op indices, in op order
  int64_t max_offset = 0, scale_offset = 0, probs_offset = 0;  // bytes
  ir::DType probs = ir::DType::kF32;
  int64_t probs_pitch = 0;  // elements
  // The running max and the exp-sums stay in registers of the warp that owns the row (rows
  // are dealt to warps round-robin, rows_per_warp each) instead of shared memory.
  bool registers = false;
  int rows_per_warp = 0;
};

struct CudaOptions {
  int64_t smem_limit = 0;  // bytes of dynamic shared memory a block may use
  // f32 matmuls may round their operands to TF32 for the tensor cores (what XLA does at
  // jax's default matmul precision on sm_80 and later); false: CUDA-core FMA at full f32.
  bool allow_tf32 = false;
  // SMs of the GPU the kernel is for: a grid of fewer blocks than half of them splits its
  // for-loop over more blocks (split-K) to fill them.
  int sm_count = 132;
};

// The most blocks one output tile's for-loop is split over.
constexpr int kMaxSplitK = 8;

struct CudaPlan {
  // Per op: the ops of the fused pass that ends here (head first), or empty.
  std::vector<std::vector<int>> pass_ending_at;
  std::vector<TilePlan> tiles;  // per tensor
  std::vector<SoftmaxGroup> softmax_groups;
  std::vector<int> softmax_group_of;  // per op: index into softmax_groups, else -1
  // Per op: for a body matmul read only by an accum_sum, that accumulator's tensor: the
  // matmul adds its product straight into the running sum (no tile of its own, no extra
  // pass); else -1.
  std::vector<int> matmul_adds_into;
  std::vector<MatmulPlan> matmuls;  // per op (matmul and accum_exp_matmul ops)
  // Stages of the pipelined body input tiles (every one with more than one stage has this
  // many): iteration it + stages - 1 loads while iteration it computes.
  int pipeline_stages = 1;
  int threads = 256;
  int64_t smem_bytes = 0;
  int64_t smem_limit = 0;
  // Split-K: each output tile's for-loop iterations are shared by split_k blocks (a grid of
  // split_k times the blocks along z), each writing its accumulators' partial sums to a
  // workspace; a second kernel adds them in a fixed order (deterministic), then runs the
  // epilogue and the stores. Only for sum accumulators (sum, sum_last, mean_last, rms_last),
  // when the grid leaves most SMs idle. 1: one kernel.
  int split_k = 1;
  int64_t workspace_floats = 0;  // per block and split: every accumulator's tile
};

// Dynamic shared memory a block may use on one architecture ("80", "90a", ...): the opt-in
// maximum per block. Unknown architectures get the smallest limit of sm_80 and later.
int64_t shared_memory_limit(const std::string& arch);

// Plans `bg` for options.smem_limit bytes of shared memory per block. Input tiles are staged
// in shared memory (body tiles in up to kMaxStages stages when the loop runs more than
// once); while that does not fit, the pipeline loses a stage (down to two), then the largest
// staged input tile gives up its second stage, or, with one stage already, is read in place
// from global memory instead. Throws IrError naming the bytes needed and the limit when the
// computed tiles alone do not fit.
CudaPlan plan_cuda_kernel(const ir::BlockGraph& bg, const CudaOptions& options);
CudaPlan plan_cuda_kernel(const ir::BlockGraph& bg, int64_t smem_limit);

int64_t element_count(const ir::Shape& s);

// True when some index into the kernel tensor of this shape exceeds int32: its index
// arithmetic must be 64-bit.
bool needs_wide_index(const ir::Shape& kernel_shape);

}  // namespace mj::codegen::cuda
