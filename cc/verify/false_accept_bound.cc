#include "cc/verify/false_accept_bound.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cc/interp/interp.h"
#include "cc/verify/degree_domain.h"

namespace mj::verify {

using interp::DenseTensor;
using interp::interpret;
using ir::KernelGraph;
using ir::Shape;

namespace {

std::vector<DenseTensor<DegreeValue>> variable_inputs(const KernelGraph& g) {
  std::vector<DenseTensor<DegreeValue>> inputs;
  for (int id : g.input_ids()) {
    const Shape& s = g.tensor(id).shape;
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    inputs.push_back({s, std::vector<DegreeValue>(size_t(n), DegreeValue{1, 0})});
  }
  return inputs;
}

}  // namespace

DegreeBound degree_bound(const KernelGraph& a, const KernelGraph& b) {
  DegreeStats stats;
  const DegreeDomain domain(&stats);
  const auto out_a = interpret(a, variable_inputs(a), domain);
  const auto out_b = interpret(b, variable_inputs(b), domain);
  DegreeBound bound;
  for (size_t i = 0; i < out_a.size(); ++i) {
    const auto& da = out_a[i].data;
    const auto& db = out_b.at(i).data;
    for (size_t j = 0; j < da.size(); ++j) {
      const double d = std::max(da[j].num + db.at(j).den, db[j].num + da[j].den);
      bound.output = std::max(bound.output, std::min(d, DegreeDomain::kCap));
    }
  }
  bound.has_exp = stats.has_exp;
  bound.exp_args = stats.has_exp ? 2 * stats.max_exp_arg : 0;
  return bound;
}

double trial_log2_bound(const DegreeBound& d, const FieldParams& f) {
  const double s = double(d.has_exp ? f.q : f.p);
  return std::min(0.0, std::log2(d.output + d.exp_args) - std::log2(s));
}

}  // namespace mj::verify
