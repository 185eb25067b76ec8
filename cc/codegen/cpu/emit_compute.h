#pragma once
// Code for the block ops that compute tiles: fused elementwise passes, matmul, reduce,
// rms_norm and concat, each on dense row-major float32 buffers with shapes as constants.
#include <string>
#include <vector>

#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

// Emits one fused pass: `pass` lists op indices (plan.pass_ending_at), head first.
void emit_pass(common::CodeWriter& w, const ir::BlockGraph& bg, const KernelPlan& plan,
               const std::vector<int>& pass);

// One matmul operand or result: a buffer expression, its shape, and the floats between its
// rows (its last dim when dense). Batch dims are dense; a strided operand has none above 1.
struct MatmulOperand {
  std::string buffer;
  ir::Shape shape;
  int64_t row_stride;
  int64_t matrix_stride;  // floats between consecutive matrices of the batch
};

// C[...] (+)= A[...] @ B[...] with batch dims broadcast like numpy. `b_ahead`: floats from
// B's tile to the next iteration's tile, for prefetching; 0 when there is none to prefetch.
// A streamed product over several matrices of B prefetches the next matrix instead.
void emit_batched_matmul(common::CodeWriter& w, const MatmulOperand& a, const MatmulOperand& b,
                         const MatmulOperand& c, bool accumulate, int64_t b_ahead = 0);

}  // namespace mj::codegen::cpu
