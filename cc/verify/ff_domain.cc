#include "cc/verify/ff_domain.h"

#include <cmath>

#include "cc/verify/splitmix.h"

namespace mj {

const char* ff_poison_name(FFPoison p) {
  switch (p) {
    case FFPoison::kNone: return "none";
    case FFPoison::kNestedExp: return "nested exp (exp of a value computed by exp)";
    case FFPoison::kDivisionByZero: return "division by zero";
    case FFPoison::kNonFiniteConstant: return "a constant that is inf or nan";
  }
  return "unknown poison";
}

FFDomain::FFDomain(const FieldParams& f, uint64_t relu_key)
    : f_(f), relu_key_(relu_key), sqrt_exp_p_((f.p + 1) / 4), sqrt_exp_q_((f.q + 1) / 4) {}

FFValue FFDomain::constant(double c) const {
  Value v;
  if (!std::isfinite(c)) {
    v.poison = FFPoison::kNonFiniteConstant;
    return v;
  }
  if (c == 0) return v;
  // c = mantissa * 2^exponent with an odd 53-bit-or-less integer mantissa: exact.
  int e = 0;
  const double frac = std::frexp(std::fabs(c), &e);  // |c| = frac * 2^e, frac in [0.5, 1)
  uint64_t mantissa = uint64_t(std::ldexp(frac, 53));
  int exponent = e - 53;
  while ((mantissa & 1) == 0) {
    mantissa >>= 1;
    ++exponent;
  }
  auto image = [&](uint64_t m) {
    const uint64_t scale = exponent >= 0 ? pow_mod(2, uint64_t(exponent), m)
                                         : pow_mod((m + 1) / 2, uint64_t(-exponent), m);
    const uint64_t r = mul_mod(mantissa % m, scale, m);
    return c < 0 ? neg_mod(r, m) : r;
  };
  v.p = image(f_.p);
  v.q = image(f_.q);
  return v;
}

FFValue FFDomain::div(Value a, Value b) const {
  const bool q_known = a.q_known && b.q_known;
  if (b.p == 0 || (q_known && b.q == 0)) {
    Value r;
    r.q_known = q_known;
    r.poison = a.poison != FFPoison::kNone   ? a.poison
               : b.poison != FFPoison::kNone ? b.poison
                                             : FFPoison::kDivisionByZero;
    return r;
  }
  const uint64_t q = q_known ? mul_mod(a.q, inv_mod(b.q, f_.q), f_.q) : 0;
  return join(a, b, mul_mod(a.p, inv_mod(b.p, f_.p), f_.p), q);
}

FFValue FFDomain::exp(Value a) const {
  Value r;
  r.q_known = false;
  r.poison = a.poison;
  if (r.poison == FFPoison::kNone && !a.q_known) r.poison = FFPoison::kNestedExp;
  if (r.poison == FFPoison::kNone) r.p = pow_mod(f_.g, a.q, f_.p);
  return r;
}

FFValue FFDomain::sqrt(Value a) const {
  a.p = pow_mod(a.p, sqrt_exp_p_, f_.p);
  if (a.q_known) a.q = pow_mod(a.q, sqrt_exp_q_, f_.q);
  return a;
}

FFValue FFDomain::relu(Value a) const {
  Value r;
  r.poison = a.poison;
  const uint64_t h = mix64(relu_key_ ^ mix64(a.p));
  r.p = h % f_.p;
  r.q = mix64(h) % f_.q;
  return r;
}

}  // namespace mj
