#pragma once
// What the CPU generator decides about a block graph before it writes any code: which ops run
// as one fused elementwise pass (cc/ir/thread_fusion.h), which tile lives in which buffer of
// the per-thread arena, which input tiles are read in place (and where the next one to
// prefetch lies), which matmuls accumulate straight into their accumulator, which
// online-softmax accumulators share a running max, and how many consecutive blocks one task
// runs in lockstep (with the matmuls they can share run once for the group).
#include <cstdint>
#include <string>
#include <vector>

#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

// The online-softmax accumulators over one score tensor `s` share its running max, the
// per-row rescale factor and the tile of exp(s - max) (all in the arena).
struct SoftmaxGroup {
  int s = -1;                  // score tensor id
  std::vector<int> accum_ops;  // op indices, in op order
  int64_t max_offset = 0;      // running max, one per row of s
  int64_t scale_offset = 0;    // exp(old max - new max), one per row
  int64_t probs_offset = 0;    // exp(s - new max), s's shape
};

// The longest row a last-dim reduce computes on the stack (16 KiB, within L1).
constexpr int64_t kMaxStackRowFloats = 4096;

struct KernelPlan {
  // Per op: the ops fused into one pass that ends at this op (in op order; the first is the
  // group's head), or empty when this op is emitted as part of a later op's pass or is not a
  // computation (input, output).
  std::vector<std::vector<int>> pass_ending_at;
  // Per tensor: the tensor whose buffer holds its value (itself, the pass end a
  // non-elementwise head writes into, or the accumulator a matmul adds into), or -1 for
  // a value that only ever lives in a register inside a fused pass.
  std::vector<int> buffer_of;
  // Per tensor that owns an arena buffer: its offset in floats (64-byte aligned); else -1.
  std::vector<int64_t> arena_offset;
  // Per tensor: a float32 input tile read in place from the kernel tensor, either because it
  // is one contiguous run or because it is matrices of whole-width-strided rows, evenly
  // apart, that only matmuls read (a weight tile: copying it would touch every byte twice);
  // or bfloat16 matrices of such rows that only matmuls read (widened as they load them,
  // mj_cpu::Bf16).
  std::vector<bool> read_in_place;
  // Per tensor with a buffer: floats between consecutive rows (last-dim runs) of its matrix;
  // the last dim for dense buffers, the kernel tensor's last dim for strided in-place tiles.
  std::vector<int64_t> row_stride;
  // Per tensor with a buffer: floats between consecutive matrices of its batch (its dims
  // before the last two, flattened): rows x row_stride for dense buffers, the kernel
  // tensor's rows x last dim for in-place tiles of strided matrices (their rows may be cut).
  std::vector<int64_t> matrix_stride;
  // Per tensor: for an input tile read in place that moves with the for-loop, the floats
  // from this tile to the one of the same input the task reads next (where prefetches aim):
  // the next block's in a block group that moves along it, else the next iteration's; else 0.
  std::vector<int64_t> next_tile_offset;
  // Per tensor: for an input tile read in place that moves with the for-loop, the floats
  // from this iteration's tile to the next iteration's; else 0.
  std::vector<int64_t> next_iteration_offset;
  // Per tensor: for an input tile copied into the arena every iteration, the elements from
  // this iteration's tile to the next iteration's in the kernel tensor (the copy prefetches
  // them: unlike a matmul's in-place operand, nothing else asks for them early); else 0.
  std::vector<int64_t> next_copy_offset;
  // Per reduce op: the elementwise pass that computes its only input (headed, perhaps, by
  // an outer product: a matmul over a k of 1), evaluated inside the reduce's loops instead
  // of on its own (empty when there is none, or it has other readers). Decode's P @ V as
  // sum(p * V) over the keys otherwise writes the whole product tile to the arena and reads
  // it back: 1.25x the time of the fused loop, cold. Over an inner dim the chain's values
  // fold into a stack row of results along the innermost kept dim, stored once; over the
  // last dim each row is computed into a stack row first and summed there with vector lanes
  // (folding a row's values one by one would be a serial float sum, which GCC does not
  // vectorize). Either row holds at most kMaxStackRowFloats.
  std::vector<std::vector<int>> reduce_prologue;
  // Per op: a body matmul whose only consumer is accum_sum adds into that accumulator.
  std::vector<bool> matmul_adds_into_accum;
  std::vector<SoftmaxGroup> softmax_groups;
  // Per op: index into softmax_groups for online-softmax accumulators, else -1.
  std::vector<int> softmax_group_of;
  int64_t arena_floats = 0;  // of one block
  // Consecutive blocks (along grid x) that one task runs in lockstep, iteration by iteration,
  // each in its own arena slice: when their tiles of a streamed input sit side by side in
  // memory, together they read long contiguous runs instead of short ones a row apart.
  int64_t block_group = 1;
  // Per op: a body matmul of a block group that runs once for the whole group, as one
  // product over the group's side-by-side B tiles (see mj_cpu::matmul_group): its A is the
  // same in every block of the group, its B tiles sit side by side along their last dim, and
  // it adds into its accumulator in each block's arena slice.
  std::vector<bool> group_matmul;
};

KernelPlan plan_kernel(const ir::BlockGraph& bg);

// The C++ variable that holds tensor t's buffer ("t12"); t must have one.
std::string buffer_name(const KernelPlan& plan, int t);

int64_t element_count(const ir::Shape& s);

}  // namespace mj::codegen::cpu
