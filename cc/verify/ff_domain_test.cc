// The finite-field domain: field laws, the exp homomorphism, sqrt, exact constants, poison.
#include "cc/verify/ff_domain.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cc/ir/elementwise.h"
#include "cc/verify/splitmix.h"

namespace mj::verify {

using ir::sigmoid;
using ir::silu;

namespace {

class FFDomainTest : public ::testing::Test {
 protected:
  const FieldParams& f = field_params(3);
  FFDomain d{f, 0x1234};
  SplitMix64 rng{42};

  FFValue random_value() {
    FFValue v;
    v.p = rng.below(f.p);
    v.q = rng.below(f.q);
    return v;
  }
  FFValue from_ints(uint64_t p, uint64_t q) {
    FFValue v;
    v.p = p;
    v.q = q;
    return v;
  }
  // p-part of m * 2^-k computed directly, for comparing with constant().
  uint64_t scaled(uint64_t m, int k, uint64_t mod) {
    return mul_mod(m % mod, inv_mod(pow_mod(2, k, mod), mod), mod);
  }
};

TEST_F(FFDomainTest, DivisionIsMultiplicationByTheInverse) {
  for (int i = 0; i < 50; ++i) {
    const FFValue a = random_value(), b = random_value();
    const FFValue r = d.div(a, b);
    EXPECT_EQ(d.mul(r, b).p, a.p);
    EXPECT_EQ(d.mul(r, b).q, a.q);
    const FFValue one = d.mul(b, d.recip(b));
    EXPECT_EQ(one.p, 1u);
    EXPECT_EQ(one.q, 1u);
  }
}

TEST_F(FFDomainTest, RingLaws) {
  for (int i = 0; i < 50; ++i) {
    const FFValue a = random_value(), b = random_value(), c = random_value();
    const FFValue lhs = d.mul(d.add(a, b), c), rhs = d.add(d.mul(a, c), d.mul(b, c));
    EXPECT_TRUE(ff_same(lhs, rhs));
    EXPECT_EQ(lhs.q, rhs.q);
    EXPECT_TRUE(ff_same(d.sub(a, b), d.add(a, d.neg(b))));
    EXPECT_TRUE(ff_same(d.sub(a, a), FFValue{}));
  }
}

// sqrt is uninterpreted: a field square root would be multiplicative, and sqrt(x y) =
// sqrt(x) sqrt(y) holds over the reals only for x, y >= 0 (in floats the two differ in where
// they are NaN). Roots of equal values stay equal.
TEST_F(FFDomainTest, SqrtIsAKeyedFunctionOfTheValue) {
  for (int i = 0; i < 20; ++i) {
    const FFValue a = random_value(), b = random_value();
    EXPECT_TRUE(ff_same(d.sqrt(a), d.sqrt(d.add(a, d.constant(0.0)))));
    EXPECT_FALSE(ff_same(d.sqrt(d.mul(a, b)), d.mul(d.sqrt(a), d.sqrt(b)))) << i;
    EXPECT_FALSE(ff_same(d.sqrt(d.div(a, b)), d.div(d.sqrt(a), d.sqrt(b)))) << i;
    EXPECT_FALSE(ff_same(d.sqrt(d.mul(a, a)), a)) << i;
    EXPECT_TRUE(d.sqrt(a).q_known);
  }
  const FFValue a = random_value();
  EXPECT_FALSE(ff_same(d.sqrt(a), d.relu(a)));
  EXPECT_FALSE(ff_same(d.sqrt(a), FFDomain(f, 0x5678).sqrt(a)));
}

// relu(x) = (x + A(x)) / 2 with A even, as with A = |.|.
TEST_F(FFDomainTest, ReluMinusReluOfTheNegationIsTheValue) {
  for (int i = 0; i < 20; ++i) {
    const FFValue a = random_value();
    const FFValue diff = d.sub(d.relu(a), d.relu(d.neg(a)));
    EXPECT_TRUE(ff_same(diff, a)) << i;
    EXPECT_TRUE(diff.q_known);
    // relu(x) + relu(-x) = |x| is even, and not x
    EXPECT_TRUE(ff_same(d.add(d.relu(a), d.relu(d.neg(a))), d.add(d.relu(d.neg(a)), d.relu(a))));
    EXPECT_FALSE(ff_same(d.relu(a), a)) << i;
    EXPECT_FALSE(ff_same(d.relu(d.relu(a)), d.relu(a))) << i;  // idempotence is not modeled
  }
}

TEST_F(FFDomainTest, ExpIsAHomomorphismFromSumsToProducts) {
  for (int i = 0; i < 50; ++i) {
    const FFValue a = random_value(), b = random_value();
    const FFValue lhs = d.exp(d.add(a, b)), rhs = d.mul(d.exp(a), d.exp(b));
    EXPECT_EQ(lhs.p, rhs.p);
    EXPECT_FALSE(lhs.q_known);
    EXPECT_FALSE(rhs.q_known);
    EXPECT_EQ(lhs.poison, FFPoison::kNone);
  }
  EXPECT_EQ(d.exp(FFValue{}).p, 1u);          // exp(0) = 1
  EXPECT_EQ(d.exp(d.neg(from_ints(5, 7))).p,  // exp(-x) = 1 / exp(x)
            d.recip(d.exp(from_ints(5, 7))).p);
  EXPECT_EQ(d.exp(from_ints(123, 1)).p, f.g);  // the p part is ignored
}

TEST_F(FFDomainTest, ExpOfExpIsPoisonedAsNestedExp) {
  const FFValue e = d.exp(random_value());
  EXPECT_EQ(d.exp(e).poison, FFPoison::kNestedExp);
  // the unknown q part survives arithmetic, so exp(exp(x) + 1) is nested too
  EXPECT_EQ(d.exp(d.add(e, d.constant(1.0))).poison, FFPoison::kNestedExp);
  // and poison propagates through everything, max included
  const FFValue bad = d.exp(e);
  EXPECT_EQ(d.mul(random_value(), bad).poison, FFPoison::kNestedExp);
  EXPECT_EQ(d.max(bad, random_value()).poison, FFPoison::kNestedExp);
  EXPECT_EQ(d.sqrt(bad).poison, FFPoison::kNestedExp);
}

TEST_F(FFDomainTest, DivisionByZeroIsPoisoned) {
  EXPECT_EQ(d.div(random_value(), FFValue{}).poison, FFPoison::kDivisionByZero);
  EXPECT_EQ(d.recip(FFValue{}).poison, FFPoison::kDivisionByZero);
  EXPECT_EQ(d.div(random_value(), from_ints(3, 0)).poison, FFPoison::kDivisionByZero);
  // a zero in Z_q does not matter where the Z_q part is unknown anyway
  FFValue unknown_q = from_ints(3, 0);
  unknown_q.q_known = false;
  EXPECT_EQ(d.div(random_value(), unknown_q).poison, FFPoison::kNone);
}

TEST_F(FFDomainTest, ConstantsMapByTheirExactRationalValue) {
  for (uint64_t m : {f.p, f.q}) {
    const bool is_p = m == f.p;
    auto part = [&](const FFValue& v) { return is_p ? v.p : v.q; };
    EXPECT_EQ(part(d.constant(0.5)), (m + 1) / 2);
    EXPECT_EQ(part(d.constant(1e-6)), scaled(4722366482869645ULL, 72, m));
    EXPECT_EQ(part(d.constant(-3.25)), neg_mod(scaled(13, 2, m), m));
    EXPECT_EQ(part(d.constant(1.0 / 3.0)), scaled(6004799503160661ULL, 54, m));
    EXPECT_EQ(part(d.constant(4096.0)), 4096u);
    EXPECT_EQ(part(d.constant(-1.0)), m - 1);
    EXPECT_EQ(part(d.constant(0.0)), 0u);
  }
  // 1/3 as a double is not the rational 1/3, and the field keeps the difference
  EXPECT_NE(d.mul(d.constant(1.0 / 3.0), d.constant(3.0)).p, 1u);
  EXPECT_EQ(d.mul(d.constant(0.25), d.constant(4.0)).p, 1u);
  EXPECT_EQ(d.constant(std::nan("")).poison, FFPoison::kNonFiniteConstant);
  EXPECT_EQ(d.constant(-INFINITY).poison, FFPoison::kNonFiniteConstant);
  // smallest subnormal: 2^-1074
  EXPECT_EQ(d.mul(d.constant(std::ldexp(1.0, -1074)), d.constant(std::ldexp(1.0, 1000))).p,
            scaled(1, 74, f.p));
}

TEST_F(FFDomainTest, MaxIsAssociativeAndCommutativeWithLowestAsItsIdentity) {
  const FFValue a = random_value(), b = random_value(), c = random_value();
  EXPECT_TRUE(ff_same(d.max(a, b), d.max(b, a)));
  EXPECT_TRUE(ff_same(d.max(d.max(a, b), c), d.max(a, d.max(b, c))));
  EXPECT_TRUE(ff_same(d.max(d.lowest(), a), a));
  // A keyed function: neither operand, nor the sum, nor a constant.
  const FFValue m = d.max(a, b);
  EXPECT_FALSE(ff_same(m, a));
  EXPECT_FALSE(ff_same(m, d.add(a, b)));
  EXPECT_FALSE(ff_same(m, FFValue{}));
  // Another trial key, another function.
  const FFDomain other(f, 12345);
  EXPECT_FALSE(ff_same(other.max(a, b), m));
}

TEST_F(FFDomainTest, AStabilizingMaxCancelsAndAnUncancelledOneDoesNot) {
  // softmax over {s0, s1}: exp(s - m) / Σ exp(s - m) equals exp(s) / Σ exp(s) exactly.
  const FFValue s0 = random_value(), s1 = random_value();
  const FFValue m = d.max(d.max(d.lowest(), s0), s1);
  const FFValue e0 = d.exp(d.sub(s0, m)), e1 = d.exp(d.sub(s1, m));
  const FFValue stabilized = d.div(e0, d.add(e0, e1));
  const FFValue plain = d.div(d.exp(s0), d.add(d.exp(s0), d.exp(s1)));
  EXPECT_TRUE(ff_same(stabilized, plain));
  // exp(s0 - m) over the unstabilized sum is off by exp(-m).
  EXPECT_FALSE(ff_same(d.div(e0, d.add(d.exp(s0), d.exp(s1))), plain));
}

TEST_F(FFDomainTest, ReluIsAKeyedFunctionOfTheValue) {
  const FFValue a = random_value(), b = random_value();
  EXPECT_TRUE(ff_same(d.relu(a), d.relu(a)));
  EXPECT_FALSE(ff_same(d.relu(a), d.relu(b)));
  EXPECT_FALSE(ff_same(d.relu(a), a));
  EXPECT_TRUE(d.relu(a).q_known);  // so exp(relu(x)) is verifiable
  const FFDomain other_key(f, 0x5678);
  EXPECT_FALSE(ff_same(d.relu(a), other_key.relu(a)));
  // same Z_p part, with and without a known Z_q part: the same real value, the same relu
  FFValue unknown_q = a;
  unknown_q.q_known = false;
  EXPECT_TRUE(ff_same(d.relu(a), d.relu(unknown_q)));
}

TEST_F(FFDomainTest, CompositesFromDomainHeaderAgreeWithTheirDefinitions) {
  const FFValue x = random_value();
  // sigmoid(x) * (1 + exp(-x)) = 1
  const FFValue s = sigmoid(d, x);
  EXPECT_EQ(d.mul(s, d.add(d.constant(1.0), d.exp(d.neg(x)))).p, 1u);
  EXPECT_TRUE(ff_same(silu(d, x), d.mul(x, s)));
}

}  // namespace
}  // namespace mj::verify
