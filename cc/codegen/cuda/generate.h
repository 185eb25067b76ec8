#pragma once
// Block graph with concrete shapes -> one self-contained CUDA translation unit:
// one __global__ kernel whose grid is the block graph's grid, computing exactly what the
// reference interpreter defines, behind an XLA FFI handler exported as `symbol` that launches
// it on XLA's stream. Compile it with nvcc -shared against jax.ffi.include_dir(). Several
// generated units may be concatenated into one.
#include <cstdint>
#include <string>

#include "cc/codegen/cuda/cuda_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cuda {

// `symbol` must be a C identifier; it also names the kernel's C++ namespace. The kernel's
// shared memory is planned for at most options.smem_limit bytes per block (the least of the
// device it will run on and of the architectures it is built for,
// cuda::shared_memory_limit); IrError when it cannot fit. Besides the handler `symbol`, the
// unit exports `int <symbol>_check(int device, char* message, int size)`: 0 when the kernel
// can run on that device, else 1 and the reason (no loadable image, too little shared
// memory, a driver older than the toolkit).
std::string generate_cuda_kernel(const ir::BlockGraph& bg, const std::string& symbol,
                                 const CudaOptions& options);
std::string generate_cuda_kernel(const ir::BlockGraph& bg, const std::string& symbol,
                                 int64_t smem_limit_bytes);

// The canonical handler symbol of a block graph: "mj_cuda_" + its content hash.
std::string cuda_kernel_symbol(const ir::BlockGraph& bg);

}  // namespace mj::codegen::cuda
