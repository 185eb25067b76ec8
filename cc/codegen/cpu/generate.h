#pragma once
// Block graph with concrete shapes -> one self-contained C++17 translation unit: a kernel that
// runs every block of the grid (as tasks on XLA's intra-op thread pool) exactly as the
// reference interpreter defines it, behind an XLA FFI handler exported as `symbol`.
// Compile it with g++ -O3 -march=native -shared -fPIC against
// jax.ffi.include_dir(). Several generated units may be concatenated into one.
#include <string>

#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

// `symbol` must be a C identifier; it also names the kernel's C++ namespace.
std::string generate_cpu_kernel(const ir::BlockGraph& bg, const std::string& symbol);

// The canonical handler symbol of a block graph: "mj_cpu_" + its content hash, so equal
// graphs share one compiled kernel and one FFI target.
std::string cpu_kernel_symbol(const ir::BlockGraph& bg);

}  // namespace mj::codegen::cpu
