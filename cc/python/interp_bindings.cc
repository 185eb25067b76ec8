// The reference interpreter over float64 and float32: C-contiguous numpy arrays in, new
// numpy arrays (owning their buffers) out.
#include <cstddef>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

#include "cc/interp/float_interp.h"
#include "cc/python/bindings.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mj::python {

using interp::DenseTensor;
using interp::interpret_f32;
using interp::interpret_f64;
using ir::KernelGraph;

namespace {

template <class V>
using InArray = nb::ndarray<const V, nb::c_contig, nb::device::cpu>;
template <class V>
using OutArray = nb::ndarray<nb::numpy, V>;

template <class V>
DenseTensor<V> to_dense(const InArray<V>& a) {
  DenseTensor<V> t;
  for (size_t d = 0; d < a.ndim(); ++d) t.shape.push_back(int64_t(a.shape(d)));
  t.data.assign(a.data(), a.data() + a.size());
  return t;
}

template <class V>
OutArray<V> to_numpy(DenseTensor<V>&& t) {
  auto* buffer = new std::vector<V>(std::move(t.data));
  nb::capsule owner(buffer, [](void* p) noexcept { delete static_cast<std::vector<V>*>(p); });
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  return OutArray<V>(buffer->data(), shape.size(), shape.data(), owner);
}

// Interpret is interpret_f64 or interpret_f32 (compiled once in cc/interp/float_interp.cc).
template <class V, auto Interpret>
std::vector<OutArray<V>> evaluate(const KernelGraph& g, const std::vector<InArray<V>>& arrays) {
  std::vector<DenseTensor<V>> inputs;
  for (const auto& a : arrays) inputs.push_back(to_dense(a));
  std::vector<DenseTensor<V>> outputs;
  {
    nb::gil_scoped_release release;  // the interpreter touches no Python objects
    outputs = Interpret(g, inputs);
  }
  std::vector<OutArray<V>> result;
  for (auto& t : outputs) result.push_back(to_numpy(std::move(t)));
  return result;
}

}  // namespace

void bind_interp(nb::module_& m) {
  m.def("evaluate_f64", &evaluate<double, &interpret_f64>, "graph"_a, "inputs"_a);
  m.def("evaluate_f32", &evaluate<float, &interpret_f32>, "graph"_a, "inputs"_a);
}

}  // namespace mj::python
