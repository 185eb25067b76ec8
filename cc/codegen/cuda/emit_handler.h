#pragma once
// The XLA FFI side of a generated CUDA kernel: the struct of raw tensor pointers, and the
// handler that checks the buffers XLA passes, checks once per device that the kernel can run
// there (a loadable image, its shared memory granted, a new enough driver: the same check
// the library exports as `<symbol>_check` for load time), and launches the grid on XLA's
// stream (ffi::PlatformStream<cudaStream_t>) with cudaLaunchKernel, which returns that
// launch's own error. Split-K kernels take their workspace from XLA's scratch allocator and
// launch twice; every other handler is graph-safe and declares the command-buffer trait.
// The symbols are extern "C" with default visibility, so the library can be built with
// -fvisibility=hidden and still be looked up by name.
#include <string>

#include "cc/codegen/cuda/tile_access.h"

namespace mj::codegen::cuda {

// `struct Io { const __nv_bfloat16* in0; ...; float* out0; ... };`
void emit_io_struct(const Emit& e);

// `handler_impl`, placed in the kernel's namespace after `kernel`.
void emit_handler_impl(const Emit& e, const std::string& symbol);

// At global scope: the exported symbol, bound to `kernel_namespace::handler_impl`.
void emit_handler_symbol(const Emit& e, const std::string& symbol,
                         const std::string& kernel_namespace);

}  // namespace mj::codegen::cuda
