#pragma once
// The finite-field value domain of the fingerprints (docs/ir-semantics.md), for the templated
// interpreter (cc/interp/domain.h). A value is a pair over Z_p x Z_q (field_params.h): two
// independent homomorphic images of the real computation. The Z_q part exists for exp only:
// exp(x) = g^(x mod q) in Z_p, a homomorphism from (Z_q, +) to (Z_p^*, x), so
// exp(a + b) = exp(a) exp(b) holds exactly. The Z_q part of exp(x) has no such image, so it
// is marked unknown, and exp of a value whose Z_q part is unknown (a nested exp) poisons the
// result: the verifier then reports "not verifiable" rather than guess.
#include <cstdint>
#include <unordered_map>

#include "cc/ir/graph.h"
#include "cc/verify/field_params.h"
#include "cc/verify/modular.h"

namespace mj::verify {

// Why a value has no meaningful fingerprint. Poison propagates through every operation.
enum class FFPoison : uint8_t {
  kNone,
  kNestedExp,          // exp of a value whose Z_q part is unknown (it came from an exp)
  kDivisionByZero,     // a divisor was 0 in Z_p, or in Z_q where that part is known
  kNonFiniteConstant,  // an inf or nan constant has no exact rational value
};
const char* ff_poison_name(FFPoison p);

struct FFValue {
  uint64_t p = 0;  // residue mod p
  uint64_t q = 0;  // residue mod q; 0 when unknown
  bool q_known = true;
  FFPoison poison = FFPoison::kNone;
};

// Same fingerprint: the Z_p parts agree, and the Z_q parts too where both are known. Two
// equivalent graphs can compute one real value with and without an exp on the way (x * e / e),
// so a known and an unknown Z_q part are not a difference.
inline bool ff_same(const FFValue& a, const FFValue& b) {
  return a.p == b.p && (!a.q_known || !b.q_known || a.q == b.q);
}

class FFDomain {
 public:
  using Value = FFValue;

  // relu_key seeds the uninterpreted functions (relu, sqrt, erf, max); both graphs of one trial
  // must share it. `counts`, when given, maps ops of a shrunk instance to the count their
  // mean divides by at full size (shrink.h); other ops divide by what they average.
  FFDomain(const FieldParams& f, uint64_t relu_key,
           const std::unordered_map<const ir::Op*, int64_t>* counts = nullptr);

  const FieldParams& field() const { return f_; }

  // Exact rational value: c = m * 2^e maps to m * inv(2)^-e (or m * 2^e) in both fields.
  Value constant(double c) const;

  Value add(Value a, Value b) const {
    return join(a, b, add_mod(a.p, b.p, f_.p), add_mod(a.q, b.q, f_.q));
  }
  Value sub(Value a, Value b) const {
    return join(a, b, sub_mod(a.p, b.p, f_.p), sub_mod(a.q, b.q, f_.q));
  }
  Value mul(Value a, Value b) const {
    return join(a, b, mul_mod(a.p, b.p, f_.p), mul_mod(a.q, b.q, f_.q));
  }
  Value neg(Value a) const {
    a.p = neg_mod(a.p, f_.p);
    a.q = neg_mod(a.q, f_.q);
    return a;
  }
  Value div(Value a, Value b) const;
  Value recip(Value a) const { return div(constant(1.0), a); }
  Value exp(Value a) const;
  // Uninterpreted: a keyed hash of the Z_p part (known Z_q part), so only square roots of
  // equal values are equal. A field square root (x^((p+1)/4)) would be multiplicative, and
  // sqrt(x y) = sqrt(x) sqrt(y) holds over the reals only where x, y >= 0: in floats the two
  // differ in where they are NaN. rsqrt, rms_norm and accum_rms_last take their roots here.
  Value sqrt(Value a) const;
  // Uninterpreted as sqrt is, under its own key: erf is not a polynomial, so erf(x) equals
  // only erf(x) (not x, not a tanh-form GELU's pieces, not erf(2x) / 2).
  Value erf(Value a) const;
  // Uninterpreted too, under a third key, rather than 1 - erf(x): equal over the reals, but
  // in float32 1 - erf(x) loses every digit of erfc's tail, so no candidate may trade one
  // for the other.
  Value erfc(Value a) const;
  // select(x, mask; c) uninterpreted too: a keyed hash of x's and the mask's Z_p parts and of
  // c. An arithmetic model (mask x + (1 - mask) c) would let a candidate trade the select for
  // that arithmetic, which is wrong in floats wherever x is NaN or inf under a 0 of the mask
  // (a padded row's scores); keyed, only the same select of the same values is equal.
  Value select(Value mask, Value x, double c) const;
  // (x + A(x)) / 2 with A an uninterpreted even function (a keyed hash of x plus that of -x),
  // which is what relu is with A = |.|: relu(x) - relu(-x) = x holds, as over the reals, and
  // nothing that needs more of |.| than evenness.
  Value relu(Value a) const;
  // max is uninterpreted, but associative and commutative like the real one, so that every
  // grouping of the same elements (a reduce, a running max over loop iterations, a max of
  // partial maxes) gives the same value: a ⊕ b = φ⁻¹(φ(a) φ(b)) with a keyed affine
  // φ(x) = k x + c in each field, and lowest() = φ⁻¹(1), its identity. A max used as a
  // softmax stabilizer cancels exactly (exp(s - m) = g^s g^-m in numerator and denominator)
  // whatever its value; one that does not cancel (an exp(s - m) sum divided by an
  // unstabilized exp(s) sum) leaves a factor g^-m, a function of the random keys, and is
  // rejected. Idempotence (max(x, x) = x) is not modeled: it can only reject.
  Value max(Value a, Value b) const;
  Value lowest() const { return max_identity_; }

  // The count the mean of `op` divides by (cc/interp/tensor_ops.h, count_constant).
  int64_t logical_count(const ir::Op& op, int64_t n) const {
    if (!counts_) return n;
    const auto it = counts_->find(&op);
    return it == counts_->end() ? n : it->second;
  }

 private:
  // The result of a binary operation: poison and an unknown Z_q part are inherited.
  static Value join(const Value& a, const Value& b, uint64_t p, uint64_t q) {
    Value r;
    r.p = p;
    r.q_known = a.q_known && b.q_known;
    r.q = r.q_known ? q : 0;
    r.poison = a.poison != FFPoison::kNone ? a.poison : b.poison;
    return r;
  }

  // φ's keys per field, and k⁻¹ (the identity is (1 - c) k⁻¹).
  struct Affine {
    uint64_t k = 1, c = 0, k_inv = 1;
  };
  static uint64_t combine(uint64_t a, uint64_t b, const Affine& phi, uint64_t m);

  // A keyed hash of a Z_p residue, as a value of both fields.
  Value hashed(uint64_t key, uint64_t p) const;

  FieldParams f_;
  uint64_t relu_key_;
  Affine max_p_, max_q_;
  Value max_identity_;
  uint64_t half_p_, half_q_;  // inverses of 2
  const std::unordered_map<const ir::Op*, int64_t>* counts_;
};

// The op table's erfc (cc/ir/elementwise.h), replaced by the keyed function above.
inline FFValue erfc(const FFDomain& d, const FFValue& x) { return d.erfc(x); }

}  // namespace mj::verify
