#pragma once
// Batched tile matmuls C[..., m, n] (+)= A[..., m, k] @ B[..., k, n], batch dims broadcast
// like numpy. 16-bit operands (both bf16 or both f16) use mma.sync.m16n8k16 tensor cores with
// f32 accumulation on sm_80 and later: each warp owns 16x8 output tiles, builds fragments from
// the operands' element reads (so any tile storage works, and ragged edges read zeros).
// f32 operands, and older architectures, use one FMA dot product per output element.
#include <functional>
#include <string>
#include <vector>

#include "cc/codegen/cuda/tile_access.h"

namespace mj::codegen::cuda {

struct MatmulOperand {
  ir::Shape shape;
  ir::DType dtype;  // the tensor's dtype: 16-bit operands may be rounded to it for mma.sync
  std::function<std::string(const std::vector<std::string>&)> read;  // element -> float expr
};

// Emits the statements that store `value`, C's element at index `idx` and dense offset
// `flat` (an epilogue fused into the matmul); null: `c[flat] = value;`.
using StoreFn = std::function<void(const std::string& value, const std::vector<std::string>& idx,
                                   const std::string& flat)>;

// C is the dense f32 shared tile `c` of shape `c_shape` (read when accumulating).
void emit_matmul(const Emit& e, const MatmulOperand& a, const MatmulOperand& b,
                 const std::string& c, const ir::Shape& c_shape, bool accumulate,
                 const StoreFn& store = nullptr);

// The operand reading tensor t through read_element.
MatmulOperand tensor_operand(const Emit& e, int t);

}  // namespace mj::codegen::cuda
