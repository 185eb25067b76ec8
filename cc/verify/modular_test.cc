// Modular arithmetic and the deterministic Miller-Rabin test.
#include "cc/verify/modular.h"

#include <gtest/gtest.h>

namespace mj::verify {
namespace {

bool prime_by_trial_division(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t d = 2; d * d <= n; ++d) {
    if (n % d == 0) return false;
  }
  return true;
}

TEST(Modular, MillerRabinAgreesWithTrialDivisionBelow20000) {
  for (uint64_t n = 0; n < 20000; ++n) EXPECT_EQ(is_prime_u64(n), prime_by_trial_division(n)) << n;
}

TEST(Modular, MillerRabinOnLargeKnownNumbers) {
  EXPECT_TRUE(is_prime_u64((uint64_t(1) << 61) - 1));   // Mersenne prime M61
  EXPECT_TRUE(is_prime_u64(18446744073709551557ULL));   // 2^64 - 59, the largest 64-bit prime
  EXPECT_FALSE(is_prime_u64((uint64_t(1) << 62) - 1));  // 3 * 715827883 * 2147483647
  EXPECT_FALSE(is_prime_u64(3215031751ULL));            // strong pseudoprime to 2, 3, 5, 7
  EXPECT_FALSE(is_prime_u64(3825123056546413051ULL));   // strong pseudoprime to 2..23
  EXPECT_FALSE(is_prime_u64(uint64_t(4294967291ULL) * 4294967279ULL));  // two 32-bit primes
}

TEST(Modular, MulModMatchesWideArithmeticNearTheTop) {
  const uint64_t m = (uint64_t(1) << 61) - 1;
  const uint64_t a = m - 1, b = m - 2;  // (-1)(-2) = 2
  EXPECT_EQ(mul_mod(a, b, m), 2u);
  EXPECT_EQ(add_mod(a, b, m), m - 3);
  EXPECT_EQ(sub_mod(1, 2, m), m - 1);
  EXPECT_EQ(neg_mod(0, m), 0u);
}

TEST(Modular, PowAndInverse) {
  const uint64_t m = (uint64_t(1) << 61) - 1;
  EXPECT_EQ(pow_mod(3, 0, m), 1u);
  EXPECT_EQ(pow_mod(2, 61, m), 1u);  // 2^61 = 1 mod 2^61 - 1
  for (uint64_t a : {uint64_t(2), uint64_t(12345), m - 1, uint64_t(1) << 40}) {
    EXPECT_EQ(mul_mod(a, inv_mod(a, m), m), 1u) << a;
  }
}

}  // namespace
}  // namespace mj::verify
