#pragma once
// Probabilistic equivalence of two kernel graphs with finite-field fingerprints: both graphs
// are interpreted on the same uniformly random inputs over Z_p x Z_q, several independent
// trials with independent primes and inputs. The false-accept bound per call is stated in
// verify.cc next to the primes and reported in the result. Equivalence includes numerical
// safety (float_safety.h, docs/ir-semantics.md): graphs equal over the reals are rejected
// when one takes exp of an unbounded value, divides or takes a square root where the other
// does not.
#include <cstdint>
#include <string>

#include "cc/ir/graph.h"

namespace mj::verify {

struct VerifyOptions {
  int trials = 0;  // 0 = the default, which meets a false-accept bound <= 2^-40
  uint64_t seed = 0;
  // Shrunk instance: same grids and for-loop ranges, every tile cut to at most max_tile
  // elements per dim. kAuto shrinks when the instance is larger than shrink_threshold elements.
  enum class Shrink { kAuto, kAlways, kNever } shrink = Shrink::kAuto;
  int max_tile = 2;
  int64_t shrink_threshold = 1 << 16;
};

struct VerifyResult {
  bool equivalent = false;
  std::string reason;  // why not, or "" when equivalent
  int trials = 0;
  double false_accept_log2 = 0;  // log2 of the bound on accepting a non-equivalent pair
  bool shrunk = false;
};

// a and b must have the same input shapes/dtypes and output shapes; otherwise the result is
// not equivalent with a reason naming the mismatch (no exception).
VerifyResult verify_equivalent(const ir::KernelGraph& a, const ir::KernelGraph& b,
                               const VerifyOptions& opts = {});

}  // namespace mj::verify
