#pragma once
// What the CUDA generator decides about a block graph before it writes code:
// the fused elementwise passes (cc/ir/thread_fusion.h), where every tile lives (shared
// memory, read in place from the kernel tensor, or a view of other tiles), the online-softmax
// groups, the threads per block, and the dynamic shared-memory layout, which is checked
// against the target's per-block limit here, before any compiler runs.
#include <cstdint>
#include <string>
#include <vector>

#include "cc/ir/graph.h"

namespace mj::codegen::cuda {

enum class Storage : uint8_t {
  kRegister,  // lives only inside a fused pass (never read outside it)
  kShared,    // a dense row-major tile in dynamic shared memory
  kGlobal,    // an input tile read in place from the kernel tensor (did not fit in shared)
  kView,      // concat: its reads go to its operands' tiles
};

struct TilePlan {
  Storage storage = Storage::kRegister;
  // Element type in shared memory: input tiles keep the kernel tensor's dtype (so cp.async
  // copies bytes unchanged and mma.sync reads 16-bit operands directly); computed tiles f32.
  ir::DType element = ir::DType::kF32;
  int64_t offset = -1;  // bytes into dynamic shared memory (kShared)
  int64_t bytes = 0;    // of one stage (input tiles: padded to 16 bytes)
  int stages = 1;       // 2: a body input tile double-buffered across for-loop iterations
  // Input tiles: bytes one cp.async moves (16, 8 or 4), the widest that every row of the tile
  // is aligned to in both memories; 0 when rows are not 4-byte aligned (plain loads).
  int copy_bytes = 0;
};

// The online-softmax accumulators over one score tensor share its running max, the per-row
// rescale factor and the tile of exp(s - max), all in shared memory.
struct SoftmaxGroup {
  int s = -1;
  std::vector<int> accum_ops;                                  // op indices, in op order
  int64_t max_offset = 0, scale_offset = 0, probs_offset = 0;  // bytes
};

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
  int threads = 256;
  int64_t smem_bytes = 0;
  int64_t smem_limit = 0;
};

// Dynamic shared memory a block may use on one architecture ("80", "90a", ...): the opt-in
// maximum per block. Unknown architectures get the smallest limit of sm_80 and later.
int64_t shared_memory_limit(const std::string& arch);

// Plans `bg` for a per-block limit of `smem_limit` bytes. Input tiles are staged in shared
// memory (body tiles double-buffered when the loop runs more than once); while that does not
// fit, the largest staged input tile gives up its second stage, or, with one stage already,
// is read in place from global memory instead. Throws
// IrError naming the bytes needed and the limit when the computed tiles alone do not fit.
CudaPlan plan_cuda_kernel(const ir::BlockGraph& bg, int64_t smem_limit);

int64_t element_count(const ir::Shape& s);

}  // namespace mj::codegen::cuda
