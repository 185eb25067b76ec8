#pragma once
// The nanobind module mirage_jax._core is split by the C++ part it exposes. Each function
// adds that part's classes and functions to the module; module.cc calls them in order.
#include <nanobind/nanobind.h>

namespace mj::python {

void bind_ir(nanobind::module_& m);
void bind_interp(nanobind::module_& m);
void bind_verify(nanobind::module_& m);
void bind_search(nanobind::module_& m);
void bind_codegen(nanobind::module_& m);
void bind_cpu_dispatch(nanobind::module_& m);

}  // namespace mj::python
