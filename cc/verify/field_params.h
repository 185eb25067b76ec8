#pragma once
// The prime fields of the fingerprints (ff_domain.h). Each trial uses its own triple:
//   q prime, q = 3 (mod 4), q in [2^60, 2^61);  p = 2q + 1 prime (a safe prime), so q | p - 1
//   and p = 3 (mod 4) as well;  g = 4 = 2^2, a square other than 1, hence of order exactly q
//   in Z_p^* (the squares form the subgroup of order (p - 1) / 2 = q, which has prime order).
// Taking q as large as p allows is what makes exp cost almost nothing in the false-accept
// bound: the exponent of exp lives in Z_q.
#include <cstdint>

namespace mj::verify {

struct FieldParams {
  uint64_t p = 0;
  uint64_t q = 0;
  uint64_t g = 0;
};

// How many distinct triples field_params() serves; trial t uses triple t % kNumFieldParams.
constexpr int kNumFieldParams = 16;

// Triple i, found deterministically: the first q = 3 (mod 4) at or above 2^60 + i * 2^55
// with q and 2q + 1 both prime (Miller-Rabin, deterministic for 64 bits). Computed once per
// process (well under a millisecond) and cached.
const FieldParams& field_params(int i);

}  // namespace mj::verify
