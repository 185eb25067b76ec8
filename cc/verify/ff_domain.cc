#include "cc/verify/ff_domain.h"

#include <cmath>
#include <cstring>

#include "cc/verify/splitmix.h"

namespace mj::verify {

const char* ff_poison_name(FFPoison p) {
  switch (p) {
    case FFPoison::kNone: return "none";
    case FFPoison::kNestedExp: return "nested exp (exp of a value computed by exp)";
    case FFPoison::kDivisionByZero: return "division by zero";
    case FFPoison::kNonFiniteConstant: return "a constant that is inf or nan";
  }
  return "unknown poison";
}

namespace {

// A keyed affine map with k != 0 in Z_m, drawn from the key.
template <typename Affine>
Affine keyed_affine(uint64_t key, uint64_t m) {
  Affine a;
  a.k = 1 + mix64(key) % (m - 1);
  a.c = mix64(key ^ 0x9e3779b97f4a7c15ULL) % m;
  a.k_inv = inv_mod(a.k, m);
  return a;
}

}  // namespace

FFDomain::FFDomain(const FieldParams& f, uint64_t relu_key,
                   const std::unordered_map<const ir::Op*, int64_t>* counts)
    : f_(f), relu_key_(relu_key), half_p_((f.p + 1) / 2), half_q_((f.q + 1) / 2), counts_(counts) {
  // The max keys come from the same per-trial key as relu's: both graphs of a trial share
  // them, and every trial draws new ones.
  max_p_ = keyed_affine<Affine>(mix64(relu_key ^ 0x6d61785fULL), f.p);
  max_q_ = keyed_affine<Affine>(mix64(relu_key ^ 0x6d61785f71ULL), f.q);
  max_identity_.p = mul_mod(sub_mod(1, max_p_.c, f.p), max_p_.k_inv, f.p);
  max_identity_.q = mul_mod(sub_mod(1 % f.q, max_q_.c, f.q), max_q_.k_inv, f.q);
}

// φ⁻¹(φ(a) φ(b)) = k a b + c (a + b) + (c² - c) / k
uint64_t FFDomain::combine(uint64_t a, uint64_t b, const Affine& phi, uint64_t m) {
  const uint64_t fa = add_mod(mul_mod(phi.k, a, m), phi.c, m);
  const uint64_t fb = add_mod(mul_mod(phi.k, b, m), phi.c, m);
  return mul_mod(sub_mod(mul_mod(fa, fb, m), phi.c, m), phi.k_inv, m);
}

FFValue FFDomain::max(Value a, Value b) const {
  return join(a, b, combine(a.p, b.p, max_p_, f_.p), combine(a.q, b.q, max_q_, f_.q));
}

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

FFValue FFDomain::hashed(uint64_t key, uint64_t p) const {
  Value r;
  const uint64_t h = mix64(key ^ mix64(p));
  r.p = h % f_.p;
  r.q = mix64(h) % f_.q;
  return r;
}

FFValue FFDomain::sqrt(Value a) const {
  Value r = hashed(relu_key_ ^ 0x73717274ULL, a.p);
  r.poison = a.poison;
  return r;
}

FFValue FFDomain::erf(Value a) const {
  Value r = hashed(relu_key_ ^ 0x657266ULL, a.p);
  r.poison = a.poison;
  return r;
}

FFValue FFDomain::erfc(Value a) const {
  Value r = hashed(relu_key_ ^ 0x65726663ULL, a.p);
  r.poison = a.poison;
  return r;
}

FFValue FFDomain::select(Value mask, Value x, double c) const {
  uint64_t bits;
  static_assert(sizeof bits == sizeof c);
  std::memcpy(&bits, &c, sizeof bits);
  Value r = hashed(relu_key_ ^ 0x73656c656374ULL ^ mix64(bits) ^ mix64(mix64(mask.p)), x.p);
  r.poison = x.poison != FFPoison::kNone ? x.poison : mask.poison;
  return r;
}

FFValue FFDomain::relu(Value a) const {
  // A(x) = h(x) + h(-x): even. relu = (x + A(x)) / 2, its Z_q part known where x's is.
  const uint64_t key = relu_key_ ^ 0x72656c75ULL;
  const Value plus = hashed(key, a.p), minus = hashed(key, neg_mod(a.p, f_.p));
  Value r;
  r.poison = a.poison;
  r.p = mul_mod(add_mod(a.p, add_mod(plus.p, minus.p, f_.p), f_.p), half_p_, f_.p);
  r.q_known = a.q_known;
  if (a.q_known) {
    r.q = mul_mod(add_mod(a.q, add_mod(plus.q, minus.q, f_.q), f_.q), half_q_, f_.q);
  }
  return r;
}

}  // namespace mj::verify
