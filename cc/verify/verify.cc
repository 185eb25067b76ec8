// verify_equivalent: finite-field fingerprints of two kernel graphs (verify.h).
//
// THE FALSE-ACCEPT BOUND
//
// One trial draws every input element uniformly and independently as a pair (x mod p,
// y mod q) with the primes of field_params.h (p = 2q + 1, q in [2^60, 2^61)), evaluates both
// graphs in ff_domain.h, and accepts when every output element agrees.
//
// Model. Every tensor element is a rational function P / Q of the input variables and of
// "atoms": the results of exp, sqrt, erf and erfc, and relu's even part
// (relu(x) = (x + A(x)) / 2).
// degree_domain.h bounds deg P and deg Q per
// element (inputs and atoms have degree 1; + and - give (max(n1 + e2, n2 + e1), e1 + e2),
// * gives (n1 + n2, e1 + e2), / swaps, constants and max have degree 0).
//
// Per trial. Let output element i differ formally: out_a[i] - out_b[i] = N / (Q_a Q_b) with
// N != 0 and deg N <= D_out = max(n_a + e_b, n_b + e_a). The trial accepts only if N vanishes
// at the random point. By Schwartz-Zippel, a nonzero polynomial of total degree d vanishes at
// a point drawn from S_1 x ... x S_n with probability <= d / min |S_j|. The inputs' Z_p parts
// are uniform over Z_p; an exp atom g^y lies in the subgroup of order q, so with exp the
// smallest sample set has q elements. Two formally different exp arguments (degree <= D_exp /
// 2 each) coincide in Z_q with probability <= D_exp / q. Hence, per trial,
//
//     eps = (D_out + D_exp) / s,   s = q if either graph uses exp, else p,
//
// and for k independent trials (each with its own fields and inputs) the bound is the
// product of the eps_t. VerifyResult::false_accept_log2 reports log2 of that product; the
// default trial count is the least k >= kMinTrials that brings it to <= 2^-40. Degrees are
// those of the instance actually evaluated (the shrunk one when shrinking), so a typical
// candidate (degree < 2^10) gets eps < 2^-50 and runs kMinTrials = 2 trials.
//
// What is heuristic (the Mirage paper's own theorem rests on similar assumptions):
//  - exp, sqrt, erf, erfc and relu's even part are treated as independent indeterminates.
//    They are not: sqrt, erf, erfc and A are keyed hashes of their argument's Z_p value (so
//    equal arguments give equal atoms, and a collision of two different arguments' hashes is
//    a further ~1/p event), exp a homomorphism. The exp-collision term is charged once per
//    trial, not once per pair of exp atoms.
//  - max is an uninterpreted associative, commutative function (ff_domain.h): a stabilizing
//    max cancels exactly, one that does not cancel is rejected, and its degree is counted
//    as a product's (a max over n elements has degree n times theirs). Graphs equal only by
//    a property of max beyond associativity and commutativity (max(x, x) = x) are rejected.
//  - A shrunk instance (shrink.h) stands in for the full one: equivalence at a small size of
//    the same structure is evidence, not proof, of equivalence at full size. Its means divide
//    by their full-size counts, so size-dependent constants keep their full-size values.
//  - Constants map by their exact rational value, so the bound is about exact arithmetic;
//    rounding is the float check's business.
// A trial that divides by zero or nests exp is reported "not verifiable": a false reject,
// never a false accept.
//
// NUMERICAL SAFETY (float_safety.h). Trial 0 also records, per graph, the values at which it
// takes exp of an argument not bounded above, divides (and which dividends a divisor that may
// be 0 divides), and takes square roots; the sets must be equal. Set membership compares Z_p
// fingerprints. A value one graph records and the other does not is missed only if it
// collides in Z_p with one of the N values the other recorded: probability <= N / p, below
// 2^-35 for the largest instance interpreted (N <= 2^26, p >= 2^61). Two fingerprints of the
// same real value always agree, so the check never rejects a pair for a collision. It
// rejects pairs that are equal over the reals; it is not part of the bound above, which is
// about the values.
#include "cc/verify/verify.h"

#include <exception>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cc/interp/interp.h"
#include "cc/verify/false_accept_bound.h"
#include "cc/verify/ff_domain.h"
#include "cc/verify/field_params.h"
#include "cc/verify/float_safety.h"
#include "cc/verify/shrink.h"
#include "cc/verify/signature_check.h"
#include "cc/verify/splitmix.h"

namespace mj::verify {

using interp::DenseTensor;
using interp::interpret;
using ir::KernelGraph;
using ir::Shape;
using ir::shape_str;

namespace {

constexpr int kMinTrials = 2;
constexpr int kMaxDefaultTrials = 64;
constexpr double kTargetLog2 = -40.0;
// The largest full instance (instance_size of both graphs) verified when shrinking fails.
constexpr int64_t kMaxFullInstance = int64_t(1) << 26;

using FFTensors = std::vector<DenseTensor<FFValue>>;

// The pair of graphs the trials run on: the originals or their shrunk rebuilds.
struct Instance {
  const KernelGraph* original_a = nullptr;
  const KernelGraph* original_b = nullptr;
  std::optional<std::pair<KernelGraph, KernelGraph>> shrunk;
  // The full-size counts of the shrunk graphs' means (shrink.h), for the field domain.
  std::unordered_map<const ir::Op*, int64_t> counts;
  std::string error;  // why there is no instance to verify

  const KernelGraph& a() const { return shrunk ? shrunk->first : *original_a; }
  const KernelGraph& b() const { return shrunk ? shrunk->second : *original_b; }
};

Instance choose_instance(const KernelGraph& a, const KernelGraph& b, const VerifyOptions& opts) {
  Instance in;
  in.original_a = &a;
  in.original_b = &b;
  const int64_t size = instance_size(a) + instance_size(b);  // each saturates at 2^62
  const bool want = opts.shrink == VerifyOptions::Shrink::kAlways ||
                    (opts.shrink == VerifyOptions::Shrink::kAuto && size > opts.shrink_threshold);
  if (!want) return in;
  try {
    in.shrunk = shrink_pair(a, b, opts.max_tile);
    in.counts = full_size_counts(a, in.shrunk->first);
    for (const auto& [op, n] : full_size_counts(b, in.shrunk->second)) in.counts[op] = n;
  } catch (const std::exception& e) {
    in.shrunk.reset();
    in.counts.clear();
    if (size > kMaxFullInstance) {
      in.error = std::string("cannot verify: shrinking failed (") + e.what() +
                 ") and the full instance computes " + std::to_string(size) +
                 " values, more than the limit of " + std::to_string(kMaxFullInstance);
    }
  }
  return in;
}

FFTensors random_inputs(const KernelGraph& g, const FieldParams& f, SplitMix64& rng) {
  FFTensors inputs;
  for (int id : g.input_ids()) {
    DenseTensor<FFValue> t;
    t.shape = g.tensor(id).shape;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.data.resize(size_t(n));
    for (FFValue& v : t.data) {
      v.p = rng.below(f.p);
      v.q = rng.below(f.q);
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::string index_str(const Shape& shape, int64_t flat) {
  Shape idx(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(idx);
}

std::string where(const DenseTensor<FFValue>& out, size_t output, size_t element, int trial) {
  return "output " + std::to_string(output) + " at " + index_str(out.shape, int64_t(element)) +
         " in trial " + std::to_string(trial);
}

// "" when every output element agrees, else why not.
std::string compare_outputs(const FFTensors& out_a, const FFTensors& out_b, int trial) {
  for (size_t i = 0; i < out_a.size(); ++i) {
    const auto& da = out_a[i].data;
    const auto& db = out_b.at(i).data;
    for (size_t j = 0; j < da.size(); ++j) {
      for (const auto& [v, name] : {std::pair{da[j], "a"}, std::pair{db.at(j), "b"}}) {
        if (v.poison != FFPoison::kNone) {
          return std::string("not verifiable: ") + ff_poison_name(v.poison) + " in graph " + name +
                 ", " + where(out_a[i], i, j, trial);
        }
      }
      if (!ff_same(da[j], db[j])) {
        return "not equivalent: " + where(out_a[i], i, j, trial) + " differs";
      }
    }
  }
  return "";
}

// Trial count and log2 bound: the requested count, or the least count >= kMinTrials that
// meets 2^-40. A vacuous per-trial bound cannot be helped by more trials.
std::pair<int, double> plan_trials(const DegreeBound& degree, int requested) {
  const int limit = requested > 0 ? requested : kMaxDefaultTrials;
  double log2_bound = 0;
  int k = 0;
  while (k < limit) {
    const double eps = trial_log2_bound(degree, field_params(k % kNumFieldParams));
    log2_bound += eps;
    ++k;
    if (requested > 0) continue;
    if (k >= kMinTrials && (log2_bound <= kTargetLog2 || eps >= 0)) break;
  }
  return {k, log2_bound};
}

VerifyResult not_equivalent(std::string reason) {
  VerifyResult r;
  r.reason = std::move(reason);
  return r;
}

}  // namespace

VerifyResult verify_equivalent(const KernelGraph& a, const KernelGraph& b,
                               const VerifyOptions& opts) {
  if (std::string why = signature_mismatch(a, b); !why.empty()) {
    return not_equivalent("not equivalent: " + why);
  }
  const Instance in = choose_instance(a, b, opts);
  if (!in.error.empty()) return not_equivalent(in.error);

  VerifyResult result;
  result.shrunk = in.shrunk.has_value();
  try {
    const DegreeBound degree = degree_bound(in.a(), in.b());
    const auto [trials, log2_bound] = plan_trials(degree, opts.trials);
    result.false_accept_log2 = log2_bound;
    for (int t = 0; t < trials; ++t) {
      const FieldParams& f = field_params(t % kNumFieldParams);
      SplitMix64 rng(mix64(opts.seed) ^ mix64(uint64_t(t) + 0x5eed));
      const FFDomain domain(f, rng.next(), in.shrunk ? &in.counts : nullptr);
      const FFTensors inputs = random_inputs(in.a(), f, rng);
      FFTensors out_a, out_b;
      PartialOps ops_a, ops_b;
      if (t == 0) {
        // The first trial also records where each graph evaluates exp, division and sqrt
        // (float_safety.h): the same values, or the graphs differ in floating point.
        const auto safe_inputs = safe_values(inputs);
        out_a = ff_values(interpret(in.a(), safe_inputs, SafetyDomain(domain, &ops_a)));
        out_b = ff_values(interpret(in.b(), safe_inputs, SafetyDomain(domain, &ops_b)));
      } else {
        out_a = interpret(in.a(), inputs, domain);
        out_b = interpret(in.b(), inputs, domain);
      }
      result.trials = t + 1;
      if (std::string why = compare_outputs(out_a, out_b, t); !why.empty()) {
        result.reason = std::move(why);
        return result;
      }
      if (t == 0) {
        if (std::string why = partial_ops_mismatch(ops_a, ops_b); !why.empty()) {
          result.reason = std::move(why);
          return result;
        }
      }
    }
  } catch (const std::exception& e) {
    result.reason = std::string("cannot verify: the interpreter failed: ") + e.what();
    return result;
  }
  result.equivalent = true;
  return result;
}

}  // namespace mj::verify
