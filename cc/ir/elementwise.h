#pragma once
// What an elementwise op computes, written once (the formulas of ops.def) over a value domain,
// so the reference interpreter, the finite-field fingerprints, the abstract expressions and the
// generated kernels cannot disagree about an op.
//
// A domain D provides:
//   using Value = ...;
//   Value constant(double c) const;
//   Value add(Value, Value) const; sub, mul, div;
//   Value neg(Value) const; recip, exp, sqrt, relu, erf;
//   Value select(Value mask, Value x, double c) const;  // mask != 0 ? x : c
// The composites below are defined from those, so every domain agrees on them; a domain may
// overload one for its own type (found by argument-dependent lookup) to keep it whole, as the
// abstract expressions keep silu opaque and the code generators call a prelude function:
//   square(x) = x * x,  sigmoid(x) = 1 / (1 + exp(-x)),  silu(x) = x * sigmoid(x),
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),  tanh(u) = 1 - 2 / (exp(2u) + 1)
//   erfc(x) = 1 - erf(x)   (floats, kernels and the finite field replace it: 1 - erf(x)
//                           cancels for x > 1)
//   gelu_erf(x) = 0.5 x erfc(-x / sqrt(2))   (jax.nn.gelu(approximate=False))
#include <optional>
#include <string>
#include <utility>

#include "cc/ir/error.h"
#include "cc/ir/op_kind.h"

namespace mj::ir {

template <class D>
typename D::Value square(const D& d, const typename D::Value& x) {
  return d.mul(x, x);
}
template <class D>
typename D::Value sigmoid(const D& d, const typename D::Value& x) {
  return d.recip(d.add(d.constant(1.0), d.exp(d.neg(x))));
}
template <class D>
typename D::Value silu(const D& d, const typename D::Value& x) {
  return d.mul(x, sigmoid(d, x));
}
template <class D>
typename D::Value gelu(const D& d, const typename D::Value& x) {
  // sqrt(2/pi) as the double nearest to it; the finite field maps that double exactly.
  const auto k = d.constant(0.7978845608028654);
  auto u = d.mul(k, d.add(x, d.mul(d.constant(0.044715), d.mul(x, d.mul(x, x)))));
  auto t =
      d.sub(d.constant(1.0), d.div(d.constant(2.0), d.add(d.exp(d.add(u, u)), d.constant(1.0))));
  return d.mul(d.mul(d.constant(0.5), x), d.add(d.constant(1.0), t));
}

template <class D>
typename D::Value erfc(const D& d, const typename D::Value& x) {
  return d.sub(d.constant(1.0), d.erf(x));
}

template <class D>
typename D::Value gelu_erf(const D& d, const typename D::Value& x) {
  // 1/sqrt(2) as the double nearest to it, as gelu's constant.
  return d.mul(d.mul(d.constant(0.5), x), erfc(d, d.mul(d.constant(-0.7071067811865476), x)));
}

namespace internal {

// One element of op `kind` if it is of class kClass (scalar c, operands x and y), else nullopt.
template <OpClass kClass, class D>
std::optional<typename D::Value> elementwise(const D& d, OpKind kind, double c,
                                             const typename D::Value& x,
                                             const typename D::Value& y) {
  (void)d, (void)c, (void)x, (void)y;
  switch (kind) {
    // Every line becomes a case; only those of kClass evaluate their formula (the empty
    // formula of a non-elementwise op would make an empty optional).
#define MJ_OP(Name, name, arity, levels, cls, attr, flops, formula)                         \
  case OpKind::k##Name:                                                                     \
    if constexpr (OpClass::cls == kClass) return std::optional<typename D::Value>(formula); \
    return std::nullopt;
#include "cc/ir/ops.def"
#undef MJ_OP
  }
  return std::nullopt;
}

}  // namespace internal

// One element of unary op `kind` with scalar c; IrError naming `who` for another kind.
template <class D>
typename D::Value apply_unary(const D& d, OpKind kind, double c, const typename D::Value& x,
                              const char* who = "interpret") {
  if (auto v = internal::elementwise<OpClass::kUnary>(d, kind, c, x, x)) return *std::move(v);
  throw IrError(std::string(who) + ": " + std::string(op_kind_name(kind)) +
                " is not a unary elementwise op");
}

// One element of binary op `kind` with scalar c (select's fill; 0 for the others); IrError
// naming `who` for another kind.
template <class D>
typename D::Value apply_binary(const D& d, OpKind kind, double c, const typename D::Value& x,
                               const typename D::Value& y, const char* who = "interpret") {
  if (auto v = internal::elementwise<OpClass::kBinary>(d, kind, c, x, y)) return *std::move(v);
  throw IrError(std::string(who) + ": " + std::string(op_kind_name(kind)) +
                " is not a binary elementwise op");
}

}  // namespace mj::ir
