#pragma once
// Batched tile matmuls C[..., m, n] (+)= A[..., m, k] @ B[..., k, n], batch dims broadcast
// like numpy, along the path the plan chose (cuda_plan.h, MatmulPlan):
//  - tensor cores (mma.sync, sm_80 and later): 16-bit operands with m16n8k16, or f32
//    operands rounded to TF32 with m16n8k8 where the plan allows it; f32 accumulation. Each
//    warp owns output tiles of 16 x (8 n_tiles) and loads A's fragment once for them.
//    Fragments come from shared memory with ldmatrix where the operand tile allows it, else
//    from element reads (any storage works, ragged edges read zeros).
//  - one CUDA-core FMA per product otherwise (f32 at full precision, and architectures
//    before sm_80).
// A matmul adding into an accumulator may keep C in registers across for-loop iterations
// (persistent accumulators): declared before the loop, spilled to C's tile after it.
#include <functional>
#include <string>
#include <vector>

#include "cc/codegen/cuda/tile_access.h"

namespace mj::codegen::cuda {

struct MatmulOperand {
  ir::Shape shape;
  ir::DType dtype;  // the tensor's dtype: 16-bit operands are rounded to it for mma.sync
  std::function<std::string(const std::vector<std::string>&)> read;  // element -> float expr
  // The shared-memory address of an element, for ldmatrix; null: read element by element.
  std::function<std::string(const std::vector<std::string>&)> address;
};

// Emits the statements that store `value`, C's element at index `idx` (an epilogue fused
// into the matmul); null: stored into C's tile.
using StoreFn = std::function<void(const std::string& value, const std::vector<std::string>& idx)>;

struct MatmulCall {
  int op = -1;  // the matmul or accum_exp_matmul op: its MatmulPlan
  int c = -1;   // C's tensor
  bool accumulate = false;
  // The op keeps C in registers (plan.matmuls[op].registers): this call adds into them.
  // row_scale (accumulating only): the shared float array C's rows are scaled by first,
  // indexed by the row's index in `row_scale_shape` (C's rows broadcast onto it).
  std::string row_scale;
  ir::Shape row_scale_shape;
  StoreFn store;
};

void emit_matmul(const Emit& e, const MatmulOperand& a, const MatmulOperand& b,
                 const MatmulCall& call);

// The operand reading tensor t (through read_element, or ldmatrix where the plan says so:
// `as_a` picks the A or B decision of op `op`).
MatmulOperand tensor_operand(const Emit& e, int t, int op, bool as_a);

// Persistent accumulators: their declaration (before the loop) and their spill into C's
// tile (after it; the caller adds the barrier).
void emit_register_accumulators(const Emit& e);
void emit_register_accumulators_spill(const Emit& e);

}  // namespace mj::codegen::cuda
