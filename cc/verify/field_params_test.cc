// The (p, q, g) triples: primes, congruences, sizes, and g of order exactly q.
#include "cc/verify/field_params.h"

#include <gtest/gtest.h>

#include <set>

#include "cc/verify/modular.h"

namespace mj::verify {
namespace {

TEST(FieldParams, EveryTripleMeetsTheRequirements) {
  std::set<uint64_t> seen;
  for (int i = 0; i < kNumFieldParams; ++i) {
    const FieldParams& f = field_params(i);
    SCOPED_TRACE(i);
    EXPECT_TRUE(is_prime_u64(f.p));
    EXPECT_TRUE(is_prime_u64(f.q));
    EXPECT_EQ((f.p - 1) % f.q, 0u);
    EXPECT_EQ(f.p % 4, 3u);
    EXPECT_EQ(f.q % 4, 3u);
    EXPECT_GE(f.p, uint64_t(1) << 61);  // 62 bits
    EXPECT_LT(f.p, uint64_t(1) << 62);
    EXPECT_GE(f.q, uint64_t(1) << 30);
    // order of g divides q and is not 1; q is prime, so it is q
    EXPECT_NE(f.g % f.p, 1u);
    EXPECT_EQ(pow_mod(f.g, f.q, f.p), 1u);
    EXPECT_TRUE(seen.insert(f.p).second) << "the trials' fields must differ";
  }
}

TEST(FieldParams, IndexOutsideTheTableThrows) {
  EXPECT_THROW(field_params(kNumFieldParams), std::out_of_range);
  EXPECT_THROW(field_params(-1), std::out_of_range);
}

}  // namespace
}  // namespace mj::verify
