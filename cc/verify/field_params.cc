#include "cc/verify/field_params.h"

#include <array>
#include <stdexcept>
#include <string>

#include "cc/verify/modular.h"

namespace mj::verify {

namespace {

// Cheap rejection before Miller-Rabin: most candidates have a small factor in q or in 2q + 1.
bool free_of_small_factors(uint64_t n) {
  static constexpr uint64_t kSmall[] = {3,  5,  7,  11, 13, 17, 19, 23, 29, 31, 37, 41,
                                        43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97};
  for (uint64_t s : kSmall) {
    if (n % s == 0) return false;
  }
  return true;
}

FieldParams find_safe_prime_field(uint64_t start) {
  uint64_t q = start + (3 + 4 - start % 4) % 4;  // the first q = 3 (mod 4) at or above start
  for (;; q += 4) {
    const uint64_t p = 2 * q + 1;
    if (!free_of_small_factors(q) || !free_of_small_factors(p)) continue;
    if (is_prime_u64(q) && is_prime_u64(p)) return FieldParams{p, q, 4};
  }
}

std::array<FieldParams, kNumFieldParams> build_table() {
  std::array<FieldParams, kNumFieldParams> table;
  for (int i = 0; i < kNumFieldParams; ++i) {
    table[i] = find_safe_prime_field((uint64_t(1) << 60) + uint64_t(i) * (uint64_t(1) << 55));
  }
  return table;
}

}  // namespace

const FieldParams& field_params(int i) {
  static const std::array<FieldParams, kNumFieldParams> table = build_table();
  if (i < 0 || i >= kNumFieldParams) {
    throw std::out_of_range("field_params: index " + std::to_string(i) + " is outside [0, " +
                            std::to_string(kNumFieldParams) + ")");
  }
  return table[i];
}

}  // namespace mj::verify
