#pragma once
// The equivalence axioms of abstract expressions (DESIGN.md §4, Mirage Table 2 in spirit).
//
// Algebra: + and * are commutative and associative, * distributes over +, division is
// multiplication by the inverse where that helps ((a/b)*c = (a*c)/b, (a/b)/c = a/(b*c),
// (a+b)/c = a/c + b/c), -a = a*(-1), the identities x*1 = x, x+0 = x, x/1 = x, exact folding
// of rational constants (x/4096 = x * 1/4096), and silu(x) = x * sigmoid(x).
//
// Sums: sum(a, sum(b, e)) = sum(a*b, e) in both directions; the splitting direction makes
// every partial sum a subterm, so a tile's sum(128, .) is found inside the target's
// sum(4096, .). sum(n, a + b) = sum(n, a) + sum(n, b).
//
// Factors independent of the summed index: sum(n, a*b) = sum(n, a)*b and
// sum(n, a/b) = sum(n, a)/b, applied to every factor. With anonymous indices this cannot be
// decided, so (as in Mirage) the axioms assume independence: this is permissive. A permissive
// axiom makes more graphs look like subexpressions and costs search time; every survivor is
// still checked by the verifier, so no wrong graph is ever accepted. The opposite choice, a
// strict axiom, would silently prune correct graphs (RMSNorm+Linear needs the rms divisor
// moved out of the k-sum). A consequence to know: matmul(x, w) counts as a subexpression of
// (x*g)@w, since g may be pulled out of the sum.
#include <cstdint>
#include <vector>

#include "cc/absexpr/rewrite.h"

namespace mj {

struct AxiomOptions {
  // If non-empty, the sum rules only create counts that divide one of these (the target's
  // reduction sizes, as saturate_target passes them). Unbounded, sum(a)*sum(b) = sum(a*b, .)
  // chains create ever larger counts that no candidate can match.
  std::vector<int64_t> sum_count_universe;
};

std::vector<Rewrite> abstract_expression_axioms(const AxiomOptions& options = {});

// The divisors d of n with 1 < d < n, ascending.
std::vector<int64_t> proper_divisors(int64_t n);

}  // namespace mj
