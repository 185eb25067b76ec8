#pragma once
// The XLA FFI side of a generated kernel: the struct of raw tensor pointers the blocks read
// and write, and the handler that checks the buffers XLA passes, then runs the grid on the
// handler's thread pool. The handler symbol is extern "C" with default visibility, so the
// library can be built with -fvisibility=hidden and still be looked up by name.
#include <string>

#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

// `struct Io { const float* in0; ...; float* out0; ... };`
void emit_io_struct(common::CodeWriter& w, const ir::BlockGraph& bg);

// The handler body function `handler_impl`, to be placed in the kernel's namespace next to
// `run_block`.
void emit_handler_impl(common::CodeWriter& w, const ir::BlockGraph& bg, const KernelPlan& plan,
                       const std::string& symbol);

// At global scope: the exported symbol, bound to `kernel_namespace::handler_impl`.
void emit_handler_symbol(common::CodeWriter& w, const ir::BlockGraph& bg, const std::string& symbol,
                         const std::string& kernel_namespace);

}  // namespace mj::codegen::cpu
