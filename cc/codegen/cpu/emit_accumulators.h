#pragma once
// The for-loop accumulators (docs/ir-semantics.md): state set up before the loop, updated
// after each iteration's body, finished where the accumulator stands in the epilogue. The
// online-softmax ones keep a running max per row of s and rescale their sums when it grows,
// which gives the interpreter's value (computed with the max over all iterations).
#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

void emit_accumulators_init(common::CodeWriter& w, const ir::BlockGraph& bg,
                            const KernelPlan& plan);
void emit_accumulators_update(common::CodeWriter& w, const ir::BlockGraph& bg,
                              const KernelPlan& plan);
// Finishes accumulator op `op_index` (a no-op for those whose state is already the value).
void emit_accumulator_finish(common::CodeWriter& w, const ir::BlockGraph& bg,
                             const KernelPlan& plan, size_t op_index);

}  // namespace mj::codegen::cpu
