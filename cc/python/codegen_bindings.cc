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
  m.def("generate_cuda_kernel", &codegen::cuda::generate_cuda_kernel, "block_graph"_a, "symbol"_a,
        "smem_limit_bytes"_a);
  m.def("cuda_kernel_symbol", &codegen::cuda::cuda_kernel_symbol, "block_graph"_a);
  m.def("cuda_shared_memory_limit", &codegen::cuda::shared_memory_limit, "arch"_a);
}

}  // namespace mj::python
