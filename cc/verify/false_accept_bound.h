#pragma once
// The mechanics of the per-trial false-accept bound; the bound itself, its derivation and
// its assumptions are stated in verify.cc.
#include "cc/ir/graph.h"
#include "cc/verify/field_params.h"

namespace mj::verify {

struct DegreeBound {
  // The largest, over output elements i, of max(num_a[i] + den_b[i], num_b[i] + den_a[i]):
  // the degree of the numerator of out_a[i] - out_b[i] over a common denominator
  // (degree_domain.h). At least 1.
  double output = 1;
  // Twice the largest degree of an exp argument in either graph: the degree of the
  // difference of two exp arguments. 0 without exp.
  double exp_args = 0;
  bool has_exp = false;
};

// Interprets both graphs (same input and output shapes) in the degree domain.
DegreeBound degree_bound(const ir::KernelGraph& a, const ir::KernelGraph& b);

// log2 of (output + exp_args) / s, s = q when either graph uses exp, else p; capped at 0.
double trial_log2_bound(const DegreeBound& d, const FieldParams& f);

}  // namespace mj::verify
