#include "cc/absexpr/constant.h"

#include <gtest/gtest.h>

namespace mj::absexpr {
namespace {

TEST(Constant, DyadicDoublesAreExactRationals) {
  EXPECT_EQ(Constant::from_double(4096.0), Constant::rational(4096, 1));
  EXPECT_EQ(Constant::from_double(1.0 / 4096), Constant::rational(1, 4096));
  EXPECT_EQ(Constant::from_double(-0.75), Constant::rational(-3, 4));
  EXPECT_EQ(Constant::from_double(-0.0), Constant::rational(0, 1));
  EXPECT_TRUE(Constant::from_double(0.5).is_rational());
}

TEST(Constant, OtherDoublesAreOpaqueAndEqualOnlyToThemselves) {
  const Constant eps = Constant::from_double(1e-6);
  EXPECT_FALSE(eps.is_rational());
  EXPECT_EQ(eps, Constant::from_double(1e-6));
  EXPECT_NE(eps, Constant::from_double(1.0000000000000002e-6));
  EXPECT_EQ(eps.value(), 1e-6);
  EXPECT_FALSE(Constant::from_double(1e300).is_rational());   // beyond 2^62
  EXPECT_FALSE(Constant::from_double(1e-300).is_rational());  // denominator beyond 2^62
}

TEST(Constant, ShortDecimalsAreExactWhenTheirDoubleFits) {
  // 0.1 is the double 3602879701896397 / 2^55: a rational like any other, not 1/10.
  const Constant tenth = Constant::from_double(0.1);
  ASSERT_TRUE(tenth.is_rational());
  EXPECT_EQ(tenth.den(), int64_t(1) << 55);
  EXPECT_EQ(tenth.value(), 0.1);
}

TEST(Constant, RationalArithmeticIsExactAndNormalized) {
  const Constant a = Constant::rational(6, -4);  // -3/2
  EXPECT_EQ(a.num(), -3);
  EXPECT_EQ(a.den(), 2);
  EXPECT_EQ(*a.plus(Constant::rational(1, 2)), Constant::rational(-1, 1));
  EXPECT_EQ(*a.times(Constant::rational(2, 3)), Constant::rational(-1, 1));
  EXPECT_EQ(*Constant::rational(4096, 1).reciprocal(), Constant::rational(1, 4096));
  EXPECT_EQ(*a.negated(), Constant::rational(3, 2));
  EXPECT_FALSE(Constant::rational(0, 1).reciprocal());
}

TEST(Constant, OpaqueOrOverflowingArithmeticDoesNotFold) {
  const Constant eps = Constant::from_double(1e-6);
  EXPECT_FALSE(eps.plus(Constant::rational(1, 1)));
  EXPECT_FALSE(eps.times(eps));
  EXPECT_FALSE(eps.reciprocal());
  const Constant big = Constant::rational(int64_t(1) << 62, 1);
  EXPECT_FALSE(big.times(big));
  EXPECT_FALSE(big.plus(big));
  // Large intermediate products that reduce back into range still fold.
  EXPECT_EQ(*big.times(Constant::rational(1, int64_t(1) << 61)), Constant::rational(2, 1));
}

TEST(Constant, TextFormRoundTrips) {
  for (const Constant& c : {Constant::rational(3, 1), Constant::rational(-1, 4096),
                            Constant::from_double(1e-6), Constant::from_double(0.044715)}) {
    auto back = parse_constant(c.to_string());
    ASSERT_TRUE(back) << c.to_string();
    EXPECT_EQ(*back, c) << c.to_string();
  }
  EXPECT_EQ(*parse_constant("9007199254740993"), Constant::rational(9007199254740993, 1));
  EXPECT_FALSE(parse_constant("x1"));
  EXPECT_FALSE(parse_constant("1/0"));
  EXPECT_FALSE(parse_constant("2e"));
}

}  // namespace
}  // namespace mj::absexpr
