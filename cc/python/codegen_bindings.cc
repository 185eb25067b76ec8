// The code generators: block graph -> kernel source text.
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "cc/codegen/cpu/generate.h"
#include "cc/python/bindings.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mj::python {

void bind_codegen(nb::module_& m) {
  m.def("generate_cpu_kernel", &codegen::generate_cpu_kernel, "block_graph"_a, "symbol"_a);
  m.def("cpu_kernel_symbol", &codegen::cpu_kernel_symbol, "block_graph"_a);
}

}  // namespace mj::python
