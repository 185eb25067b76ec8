#pragma once
// Helpers shared by the interpreter's tests (header-only, no gtest dependency): deterministic
// random inputs, casting between float types, and a closeness check against a float64
// reference computed by brute-force loops in the test itself.
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>

#include "cc/interp/dense_tensor.h"
#include "cc/ir/graph.h"

namespace mj::interp_testing {

inline int64_t element_count(const ir::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Uniform in [lo, hi), rounded to float so the float32 and float64 runs see the same inputs.
inline interp::DenseTensor<double> random_tensor(const ir::Shape& shape, std::mt19937& rng,
                                                 double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  interp::DenseTensor<double> t{shape, {}};
  for (int64_t i = 0; i < element_count(shape); ++i) t.data.push_back(double(float(dist(rng))));
  return t;
}

template <class T>
interp::DenseTensor<T> cast_tensor(const interp::DenseTensor<double>& x) {
  interp::DenseTensor<T> t{x.shape, {}};
  for (double v : x.data) t.data.push_back(T(v));
  return t;
}

template <class T>
std::vector<interp::DenseTensor<T>> cast_tensors(
    const std::vector<interp::DenseTensor<double>>& xs) {
  std::vector<interp::DenseTensor<T>> out;
  for (const auto& x : xs) out.push_back(cast_tensor<T>(x));
  return out;
}

// |got - want| <= tol * (1 + |want|): float64 runs are checked to near round-off; float32
// runs to a few hundred ulps, room for float32 rounding in sums of up to 64 terms of size ~1.
template <class T>
double tolerance() {
  return std::is_same_v<T, double> ? 1e-10 : 3e-5;
}

// "" when every element is close, else a description of the shape mismatch or the first
// element that is not.
template <class T>
std::string mismatch(const interp::DenseTensor<T>& got, const interp::DenseTensor<double>& want) {
  std::ostringstream msg;
  if (got.shape != want.shape || got.data.size() != want.data.size()) {
    msg << "shape " << ir::shape_str(got.shape) << " (" << got.data.size() << " values), expected "
        << ir::shape_str(want.shape) << " (" << want.data.size() << " values)";
    return msg.str();
  }
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double g = double(got.data[i]), w = want.data[i];
    if (!(std::fabs(g - w) <= tolerance<T>() * (1.0 + std::fabs(w)))) {
      msg << "element " << i << " of " << ir::shape_str(want.shape) << ": got " << g
          << ", expected " << w;
      return msg.str();
    }
  }
  return "";
}

}  // namespace mj::interp_testing
