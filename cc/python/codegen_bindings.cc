// The code generators: block graph -> kernel source text.
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "cc/codegen/cpu/generate.h"
#include "cc/codegen/cuda/cuda_plan.h"
#include "cc/codegen/cuda/generate.h"
#include "cc/python/bindings.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mj::python {

void bind_codegen(nb::module_& m) {
  m.def("generate_cpu_kernel", &codegen::cpu::generate_cpu_kernel, "block_graph"_a, "symbol"_a);
  m.def("cpu_kernel_symbol", &codegen::cpu::cpu_kernel_symbol, "block_graph"_a);
  m.def(
      "generate_cuda_kernel",
      [](const ir::BlockGraph& bg, const std::string& symbol, int64_t smem_limit_bytes,
         bool allow_tf32) {
        codegen::cuda::CudaOptions options;
        options.smem_limit = smem_limit_bytes;
        options.allow_tf32 = allow_tf32;
        return codegen::cuda::generate_cuda_kernel(bg, symbol, options);
      },
      "block_graph"_a, "symbol"_a, "smem_limit_bytes"_a, "allow_tf32"_a = false,
      "The CUDA translation unit of a block graph, its shared memory planned for "
      "smem_limit_bytes per block; allow_tf32: f32 matmuls may run on TF32 tensor cores.");
  m.def("cuda_kernel_symbol", &codegen::cuda::cuda_kernel_symbol, "block_graph"_a);
  m.def("cuda_shared_memory_limit", &codegen::cuda::shared_memory_limit, "arch"_a);
}

}  // namespace mj::python
