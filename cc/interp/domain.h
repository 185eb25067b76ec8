#pragma once
// The interpreter is written once over a value domain, so the same literal block-by-block
// execution serves float64/float32 reference evaluation and finite-field fingerprints.
//
// A domain D provides:
//   using Value = ...;
//   Value constant(double c) const;        // exact: a binary float m*2^e maps to m*inv(2^e)
//   Value add(Value, Value) const; sub, mul, div;
//   Value neg(Value) const; recip, exp, sqrt, erf;
//   Value relu(Value) const;
//   Value max(Value, Value) const;         // the finite field: an uninterpreted associative,
//                                          // commutative function (cc/verify/ff_domain.h)
//   Value lowest() const;                  // identity of max (-inf for floats)
//   Value select(Value mask, Value x, double c) const;  // mask != 0 ? x : c
// What each elementwise op computes from these is written once, in cc/ir/ops.def and
// cc/ir/elementwise.h (sigmoid, silu, gelu and square are composites defined there).
#include <cmath>
#include <limits>

namespace mj::interp {

template <class T>
struct FloatDomain {
  using Value = T;
  Value constant(double c) const { return Value(c); }
  Value add(Value a, Value b) const { return a + b; }
  Value sub(Value a, Value b) const { return a - b; }
  Value mul(Value a, Value b) const { return a * b; }
  Value div(Value a, Value b) const { return a / b; }
  Value neg(Value a) const { return -a; }
  Value recip(Value a) const { return Value(1) / a; }
  Value exp(Value a) const { return std::exp(a); }
  Value sqrt(Value a) const { return std::sqrt(a); }
  // erf(NaN) = NaN and erf(±inf) = ±1, as lax.erf.
  Value erf(Value a) const { return std::erf(a); }
  // NaN propagates through relu and max, as in XLA (docs/ir-semantics.md, "NaN").
  Value relu(Value a) const { return a != a ? a : (a > Value(0) ? a : Value(0)); }
  Value max(Value a, Value b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
  Value lowest() const { return -std::numeric_limits<T>::infinity(); }
  // jnp.where(mask, x, c): a NaN mask counts as nonzero (true), as a NaN converts to bool.
  Value select(Value mask, Value x, double c) const { return mask != Value(0) ? x : Value(c); }
};

// erfc whole, as lax.erfc: 1 - erf(x) would lose every digit of erfc(x) for x past about 4.
template <class T>
T erfc(const FloatDomain<T>&, const T& x) {
  return std::erfc(x);
}

// exp(s - m) for the online-softmax accumulators, m the max of s's row. Over floats a row
// whose every score is -inf has m = -inf and holds no mass: its terms are 0, not
// exp(-inf - -inf) = NaN, as in generated code, so a fully masked chunk of a split softmax
// contributes nothing (a row masked everywhere still ends as 0 / 0 = NaN, as XLA's softmax).
template <class D>
typename D::Value softmax_term(const D& d, typename D::Value s, typename D::Value m) {
  return d.exp(d.sub(s, m));
}
template <class T>
T softmax_term(const FloatDomain<T>& d, T s, T m) {
  if (m == -std::numeric_limits<T>::infinity()) return T(0);
  return d.exp(d.sub(s, m));
}

}  // namespace mj::interp
