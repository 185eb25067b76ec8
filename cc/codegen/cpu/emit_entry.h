#pragma once
// The boundary of a generated CPU kernel: the struct of raw tensor pointers the blocks read
// and write, and two exported C functions. `<symbol>(grid, buffers)` builds the struct from
// the buffers (inputs, then outputs) and runs the kernel's tasks through `grid`;
// `<symbol>_signature()` describes the buffers it expects, so that the extension's XLA FFI
// handler (cc/python/cpu_dispatch.cc) checks what XLA passes before calling it. Both are
// extern "C" with default visibility, so the library can be built with -fvisibility=hidden
// and still be looked up by name.
#include <cstdint>
#include <string>

#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

// A signature's words: {version, inputs, outputs, then per buffer (inputs, then outputs):
// dtype (0 float32, 1 bfloat16, 2 float16), rank, dims...}.
inline constexpr int64_t kCpuSignatureVersion = 1;

// `struct Io { const float* in0; ...; float* out0; ... };`
void emit_io_struct(common::CodeWriter& w, const ir::BlockGraph& bg);

// `run_task`, the C-callable task of the grid, to be placed in the kernel's namespace next
// to `run_blocks`.
void emit_task(common::CodeWriter& w);

// At global scope: the exported entry and signature of kernel `symbol`, whose Io and
// run_task are in `kernel_namespace`.
void emit_entry(common::CodeWriter& w, const ir::BlockGraph& bg, const KernelPlan& plan,
                const std::string& symbol, const std::string& kernel_namespace);

}  // namespace mj::codegen::cpu
