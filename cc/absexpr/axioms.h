#pragma once
// The equivalence axioms of abstract expressions (after Mirage's Table 2).
//
// Algebra: + and * are commutative and associative, * distributes over +, division is
// multiplication by the inverse where that helps ((a/b)*c = (a*c)/b, (a/b)/c = a/(b*c),
// (a+b)/c = a/c + b/c), -a = a*(-1), the identities x*1 = x, x+0 = x, x/1 = x, exact folding
// of rational constants (x/4096 = x * 1/4096), and silu(x) = x * sigmoid(x).
//
// Sums: sum(a, sum(b, e)) = sum(a*b, e); sum(n, a + b) = sum(n, a) + sum(n, b); and a factor
// or divisor independent of the summed index moves across the sum: sum(n, a*b) = sum(n, a)*b,
// sum(n, a/b) = sum(n, a)/b. Partial sums (a tile's sum(128, .) inside the target's
// sum(4096, .)) are not materialized here; the subexpression lookup recognizes them
// (subexpression.h), which keeps the e-graph 15 to 30 times smaller.
//
// Independence cannot be decided from anonymous indices. The approximation, chosen so that
// it errs on the permissive side where that is cheap (every survivor is verified anyway) and
// is strict only where permissiveness measurably blew up the e-graph:
//  * moving out: a factor may leave sum(n, a*b) unless it shares an input with the rest
//    (x in sum(n, x*x) varies with the index; pulling it out anyway made the mean square of
//    ntrans explode). So the rms of RMSNorm+Linear (its x occurs only under its own sum)
//    leaves the k-sum, and so does a gain vector g: as in Mirage, matmul(x, w) then counts
//    as a subexpression of (x*g)@w, and the verifier rejects what the pruning lets through.
//  * moving in: only factors that contain no sum. A reduction result moved into another
//    reduction creates nested sums that the rules above keep reshuffling (ntrans hit the
//    node limit), and no single block graph computes that way (the factor would be an
//    epilogue value inside a loop body).
//  * distributing: a*(b+c) is expanded only if a shares no input with b+c, so squaring a sum
//    (the mean square of ntrans) does not expand into every product of its terms.
#include <cstdint>
#include <vector>

#include "cc/absexpr/rewrite.h"

namespace mj::absexpr {

struct AxiomOptions {
  // If non-empty, sum(a, sum(b, e)) = sum(a*b, e) only creates counts that divide one of
  // these (the target's reduction sizes, as saturate_target passes them): no candidate can
  // match a larger count, and nested sums of unrelated reductions would otherwise multiply.
  std::vector<int64_t> sum_count_universe;
};

std::vector<Rewrite> abstract_expression_axioms(const AxiomOptions& options = {});

}  // namespace mj::absexpr
