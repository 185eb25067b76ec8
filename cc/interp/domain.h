#pragma once
// The interpreter is written once over a value domain, so the same literal block-by-block
// execution serves float64/float32 reference evaluation and finite-field fingerprints.
//
// A domain D provides:
//   using Value = ...;
//   Value constant(double c) const;        // exact: a binary float m*2^e maps to m*inv(2^e)
//   Value add(Value, Value) const; sub, mul, div;
//   Value neg(Value) const; recip, exp, sqrt;
//   Value relu(Value) const;
//   Value max(Value, Value) const;         // the finite field treats max as a softmax
//                                          // stabilizer (cc/verify/ff_domain.h)
//   Value lowest() const;                  // identity of max (-inf for floats)
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
  Value relu(Value a) const { return a > Value(0) ? a : Value(0); }
  Value max(Value a, Value b) const { return a > b ? a : b; }
  Value lowest() const { return -std::numeric_limits<T>::infinity(); }
};

}  // namespace mj::interp
