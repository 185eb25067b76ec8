// The finite-field equivalence checker: options in as plain arguments, the result as a
// read-only record.
#include <cstdint>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "cc/ir/error.h"
#include "cc/python/bindings.h"
#include "cc/verify/verify.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mj::python {

using ir::IrError;
using ir::KernelGraph;
using verify::verify_equivalent;
using verify::VerifyOptions;
using verify::VerifyResult;

namespace {

VerifyOptions::Shrink parse_shrink(const std::string& s) {
  if (s == "auto") return VerifyOptions::Shrink::kAuto;
  if (s == "always") return VerifyOptions::Shrink::kAlways;
  if (s == "never") return VerifyOptions::Shrink::kNever;
  throw IrError("verify_equivalent: unknown shrink mode '" + s +
                "' (expected auto, always or never)");
}

}  // namespace

void bind_verify(nb::module_& m) {
  nb::class_<VerifyResult>(m, "VerifyResultInfo")
      .def_ro("equivalent", &VerifyResult::equivalent)
      .def_ro("reason", &VerifyResult::reason)
      .def_ro("trials", &VerifyResult::trials)
      .def_ro("false_accept_log2", &VerifyResult::false_accept_log2)
      .def_ro("shrunk", &VerifyResult::shrunk);

  m.def(
      "verify_equivalent",
      [](const KernelGraph& a, const KernelGraph& b, int trials, uint64_t seed,
         const std::string& shrink) {
        VerifyOptions opts;
        opts.trials = trials;
        opts.seed = seed;
        opts.shrink = parse_shrink(shrink);
        nb::gil_scoped_release release;
        return verify_equivalent(a, b, opts);
      },
      "a"_a, "b"_a, "trials"_a = 0, "seed"_a = 0, "shrink"_a = "auto");
}

}  // namespace mj::python
