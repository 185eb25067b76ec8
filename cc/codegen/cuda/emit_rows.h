#pragma once
// Ops that reduce: reduce(sum|mean|max), rms_norm, and the for-loop accumulators, including
// the online-softmax ones. Reductions along the last dim give each row to one warp (lanes
// stride the row, a shuffle tree combines them), so long rows stay parallel.
#include <cstddef>

#include "cc/codegen/cuda/tile_access.h"

namespace mj::codegen::cuda {

void emit_reduce(const Emit& e, const ir::Op& op);
void emit_rms_norm(const Emit& e, const ir::Op& op);

// Before the loop: sums start at 0, running maxes at -inf.
void emit_accumulators_init(const Emit& e);
// After the loop: online-softmax state kept in registers, into the accumulators' tiles (the
// caller adds the barrier).
void emit_softmax_state_spill(const Emit& e);
// At the end of every iteration, after the body: each accumulator takes this iteration's
// tile. Emits its own __syncthreads() between dependent steps and after the last.
void emit_accumulators_update(const Emit& e);
// In the epilogue, where accumulator op `op_index` stands: its final value (mean, rms, max).
// Returns false when there is nothing to do (the running value is the result).
bool emit_accumulator_finish(const Emit& e, size_t op_index);

}  // namespace mj::codegen::cuda
