#pragma once
// Moving tiles between the kernel's tensors and a block's buffers: cutting an input tile at
// its imap/fmap origin (docs/ir-semantics.md, "Block graph"), converting bf16/f16 to float32,
// and storing an output tile at its omap origin, converting back.
#include <string>

#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

// The C++ element type of a kernel tensor in memory: "float" or "uint16_t".
const char* storage_type(ir::DType d);

// The element type of input tile t's pointer when it is read in place: "float", or
// "mj_cpu::Bf16" for a bfloat16 tile the matmuls widen as they load it.
const char* in_place_type(const ir::BlockGraph& bg, int t);

// Emits the load of block input op `input` (its loop iteration is in variable `it`).
void emit_input_load(common::CodeWriter& w, const ir::BlockGraph& bg, const KernelPlan& plan,
                     const ir::Op& input);

// Emits the store of block output op `output` into the kernel output.
void emit_output_store(common::CodeWriter& w, const ir::BlockGraph& bg, const KernelPlan& plan,
                       const ir::Op& output);

}  // namespace mj::codegen::cpu
