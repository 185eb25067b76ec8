#include "cc/search/kernel_enumerator.h"

#include <algorithm>
#include <functional>

#include "cc/absexpr/derive.h"
#include "cc/ir/error.h"
#include "cc/search/block_enumerator.h"
#include "cc/search/candidates.h"
#include "cc/search/loose_ends.h"
#include "cc/search/op_admission.h"
#include "cc/search/op_proposals.h"
#include "cc/search/recomputation.h"
#include "cc/search/stabilizers.h"

namespace mj::search {

using absexpr::ExprId;
using ir::IrError;
using ir::KernelGraph;
using ir::Op;
using ir::Tensor;

namespace {

void append_predefined(const KernelState& s, const Op& op, SearchShared& shared, Worker& worker) {
  std::vector<ExprId> exprs;
  if (worker.pruner.enabled()) {
    for (const TensorFacts& f : s.facts) exprs.push_back(f.expr);
  }
  auto admitted = admit_op(s.graph, op, s.facts, s.table, exprs, 1, shared, worker);
  if (!admitted) return;
  KernelState child = s;
  try {
    append_op(child.graph, op);
  } catch (const IrError&) {
    return;
  }
  if (admitted->concat_table) child.table = std::move(*admitted->concat_table);
  for (int t : op.inputs) ++child.facts[t].consumers;
  child.facts.push_back(new_tensor_facts(op, admitted->expr, admitted->classes, s.facts));
  child.last_key = OpKey::of(op);
  child.ops = s.ops + 1;
  expand_kernel(child, shared, worker);
}

// Whether s has stacked partial results (ClassTable::Stacking) that nothing combines yet.
bool has_pending_partials(const KernelState& s) {
  for (const TensorFacts& f : s.facts) {
    if (f.consumers > 0) continue;
    for (int c : f.classes) {
      if (c != kUnitClass && s.table.stacking(c)) return true;
    }
  }
  return false;
}

// Per kernel tensor, the bit set of the program inputs it depends on (inputs past the 64th
// share the last bit, which only weakens the cut below).
std::vector<uint64_t> input_dependencies(const KernelGraph& g) {
  std::vector<uint64_t> deps(g.tensors().size(), 0);
  const auto& ins = g.input_ids();
  for (size_t i = 0; i < ins.size(); ++i) deps[ins[i]] = uint64_t(1) << std::min<size_t>(i, 63);
  for (const Op& op : g.ops()) {
    uint64_t d = 0;
    for (int t : op.inputs) d |= deps[t];
    for (int t : op.outputs) deps[t] |= d;
  }
  return deps;
}

// Whether t has an index the target's outputs no longer have: the only index a loop walks,
// so the only tensors a block graph may read twice, once tile by tile and once whole.
// Program inputs only: a kernel tensor computed by an earlier kernel op could have had its
// statistic computed there, and each copy adds a block input to every subset it joins.
bool has_reduced_index(const KernelState& s, int t, const SearchShared& shared) {
  const int p = s.graph.tensor(t).producer;
  if (p < 0 || s.graph.ops()[p].kind != ir::OpKind::kInput) return false;
  const auto& outs = shared.output_classes;
  for (int c : s.facts[t].classes) {
    if (c != kUnitClass && std::find(outs.begin(), outs.end(), c) == outs.end()) return true;
  }
  return false;
}

}  // namespace

KernelState initial_kernel_state(const SearchShared& shared, Worker& worker) {
  KernelState s;
  s.table = shared.classes.table;
  const auto& ids = shared.target.input_ids();
  for (size_t i = 0; i < ids.size(); ++i) {
    const Tensor& t = shared.target.tensor(ids[i]);
    s.graph.new_input(t.shape, t.dtype);
    const ExprId e = worker.pruner.enabled() ? worker.pruner.input(int(i)) : 0;
    s.facts.push_back(TensorFacts{e, shared.classes.inputs[i], 0});
  }
  return s;
}

std::vector<KernelMove> kernel_moves(const KernelState& s, const SearchShared& shared) {
  std::vector<KernelMove> moves;
  const SearchConfig& cfg = shared.config;
  if (s.ops >= cfg.max_kernel_ops) return moves;
  if (preset_splits_reductions(cfg) && s.block_graphs > 0 && !has_pending_partials(s)) {
    return moves;
  }
  ProposalOptions opts;
  opts.level = Level::kKernel;
  opts.concat = cfg.preset == "lora";
  opts.scalars = shared.scalars;
  opts.select_fills = shared.select_fills;
  opts.max = shared.target_has_max;
  if (s.last_key) opts.min_newest_input = std::max(0, s.last_key->newest_input());
  for_each_proposal(s.graph, opts, [&](const Op& op) {
    if (s.last_key && !(*s.last_key < OpKey::of(op))) return;
    KernelMove m;
    m.op = op;
    moves.push_back(std::move(m));
  });
  if (s.block_graphs >= cfg.max_block_graphs) return moves;
  // Block graph inputs: every set of up to max_block_inputs kernel tensors, ascending.
  const int n = int(s.graph.tensors().size());
  // A block graph that ends the candidate (the last kernel op, or under the "attention"
  // preset one that stores no partial results) must store the target's output itself, so
  // with a single output its inputs must reach every program input the output reads.
  const bool single_output = shared.target.output_ids().size() == 1;
  const std::vector<uint64_t> deps = input_dependencies(s.graph);
  uint64_t needed = 0;
  if (single_output) {
    const std::vector<uint64_t> target_deps = input_dependencies(shared.target);
    const auto& tins = shared.target.input_ids();
    const uint64_t all = tins.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << tins.size()) - 1;
    needed = target_deps[shared.target.output_ids()[0]] & all;
  }
  const bool last_op = s.ops + 1 >= cfg.max_kernel_ops;
  std::vector<int> chosen;
  std::function<void(int)> subsets = [&](int from) {
    if (!chosen.empty()) {
      std::vector<BlockInputSpec> specs;
      for (size_t i = 0; i < chosen.size(); ++i) {
        const int t = chosen[i];
        specs.push_back({s.graph.tensor(t).shape, s.graph.tensor(t).dtype, s.facts[t].classes,
                         i > 0 && chosen[i - 1] == t});
      }
      const bool partials = partials_allowed(cfg, s.ops);
      uint64_t reached = 0;
      for (int t : chosen) reached |= deps[t];
      const bool covers = !single_output || (reached & needed) == needed;
      for (BlockLayout& l : block_layouts(specs, shared.output_classes, s.table, cfg, partials,
                                          shared.classes.combinable)) {
        // Under "attention" a block graph storing partials is followed only by kernels that
        // combine them (search.h), which read partials, so it too must reach every input.
        const bool ends = last_op || preset_splits_reductions(cfg);
        if (ends && !covers) continue;
        KernelMove m;
        m.opens_block_graph = true;
        m.inputs = chosen;
        m.layout = std::move(l);
        moves.push_back(std::move(m));
      }
    }
    if (int(chosen.size()) == cfg.max_block_inputs) return;
    for (int t = from; t < n; ++t) {
      chosen.push_back(t);
      subsets(t + 1);
      // The same tensor again, read whole before the loop (BlockInputSpec::whole).
      if (int(chosen.size()) < cfg.max_block_inputs && has_reduced_index(s, t, shared)) {
        chosen.push_back(t);
        subsets(t + 1);
        chosen.pop_back();
      }
      chosen.pop_back();
    }
  };
  subsets(0);
  return moves;
}

void run_kernel_move(const KernelState& s, const KernelMove& m, SearchShared& shared,
                     Worker& worker) {
  if (!m.opens_block_graph) {
    append_predefined(s, m.op, shared, worker);
    return;
  }
  enumerate_block_graphs(s, m.inputs, m.layout, shared, worker,
                         [&](KernelState&& child) { expand_kernel(child, shared, worker); });
}

void expand_kernel(const KernelState& s, SearchShared& shared, Worker& worker) {
  if (should_stop(shared, worker)) return;
  shared.explored.fetch_add(1, std::memory_order_relaxed);
  if (!kernel_state_viable(s, shared)) return;
  check_candidate(s, shared, worker);
  for (const KernelMove& m : kernel_moves(s, shared)) {
    if (should_stop(shared, worker)) return;
    run_kernel_move(s, m, shared, worker);
  }
}

}  // namespace mj::search
