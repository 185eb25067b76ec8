// mirage_jax._core: thin conversions between Python and the C++ core. Every rule lives in
// the core; the Python package (mirage_jax/graph.py) adds handles and argument checks.
#include <nanobind/nanobind.h>

#include "cc/ir/error.h"
#include "cc/python/bindings.h"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  // A ValueError subclass, so callers that only know Python's conventions still catch it.
  nb::exception<mj::ir::IrError>(m, "IRError", PyExc_ValueError);
  mj::python::bind_ir(m);
  mj::python::bind_interp(m);
  mj::python::bind_verify(m);
  mj::python::bind_search(m);
  mj::python::bind_codegen(m);
  mj::python::bind_cpu_dispatch(m);
}
