#include "cc/search/block_enumerator.h"

#include <algorithm>

#include "cc/absexpr/derive.h"
#include "cc/ir/error.h"
#include "cc/ir/hash.h"
#include "cc/search/block_op_rules.h"
#include "cc/search/loose_ends.h"
#include "cc/search/op_admission.h"
#include "cc/search/op_proposals.h"
#include "cc/search/recomputation.h"
#include "cc/search/stabilizers.h"
#include "cc/search/user_structure.h"

namespace mj::search {

using absexpr::ExprId;
using ir::block_graph_hash;
using ir::BlockGraph;
using ir::Dim3;
using ir::IrError;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Tensor;

namespace {

// The classes of an input's tile. A loop walking a stack of partial results chunk by chunk
// hands each iteration one partial, whose dim indexes what the partial's tile did.
DimClasses tile_classes(DimClasses classes, int fmap, const BlockLayout& layout,
                        const ClassTable& table) {
  if (fmap < 0) return classes;
  const ClassTable::Stacking* st = table.stacking(classes[fmap]);
  if (st && st->chunks == layout.loop_class) classes[fmap] = st->tile;
  return classes;
}

struct BlockSearch {
  const KernelState& parent;
  const std::vector<int>& inputs;
  const BlockLayout& layout;
  SearchShared& shared;
  Worker& worker;
  const std::function<void(KernelState&&)>& on_close;
  ProposalOptions proposals;
  int output_cap = 0;  // loose_ends.h
  bool allow_partials = false;

  void expand(const BlockState& s);
  void try_close(const BlockState& s);
  void close_with(const BlockState& s, const std::vector<int>& outs);
  bool is_target_output(ExprId e);
  void store_outputs(const BlockState& s, const std::vector<int>& outs,
                     const std::vector<std::vector<Dim3>>& omaps, size_t i,
                     std::vector<Dim3>& chosen);
};

void BlockSearch::expand(const BlockState& s) {
  if (should_stop(shared, worker)) return;
  shared.explored.fetch_add(1, std::memory_order_relaxed);
  int dangling = 0, unused_inputs = 0;
  for (int t = 0; t < int(s.facts.size()); ++t) {
    if (s.facts[t].consumers > 0) continue;
    ++(t < int(inputs.size()) ? unused_inputs : dangling);
  }
  if (!block_state_viable(dangling, unused_inputs, shared.config.max_block_ops - s.ops,
                          output_cap)) {
    return;
  }
  try_close(s);
  if (s.ops >= shared.config.max_block_ops) return;
  ProposalOptions opts = proposals;
  if (s.last_key) opts.min_newest_input = std::max(0, s.last_key->newest_input());
  const BlockGraph& g = *s.graph;
  std::vector<ExprId> exprs;  // per tensor, as derivation wants them
  if (worker.pruner.enabled()) {
    for (const TensorFacts& f : s.facts) exprs.push_back(f.expr);
  }
  for_each_proposal(g, opts, [&](const Op& op) {
    if (should_stop(shared, worker)) return;
    // Cheapest and most selective checks first: order, phase, then the abstract expression
    // (which rejects most proposals), then shapes and index classes.
    OpKey key = OpKey::of(op);
    if (s.last_key && !(*s.last_key < key)) return;
    const auto phase = result_phase(g, op);
    if (!phase) return;
    auto admitted = admit_op(g, op, s.facts, s.table, exprs, layout.forloop_range, shared, worker);
    if (!admitted) return;
    const std::vector<DimClasses>& in_classes = admitted->in_classes;
    if (!accumulates_loop_index_only(op, in_classes[0], layout.loop_class)) return;
    if (!allow_partials && reduces_split_index(op, in_classes[0], layout)) return;
    if (rescales_by_block_max(op, in_classes[0], layout)) return;
    BlockState child;
    child.graph = std::make_shared<BlockGraph>(g);
    try {
      append_op(*child.graph, op);
    } catch (const IrError&) {
      return;  // a rule the quick checks above do not model
    }
    child.facts = s.facts;
    child.table = admitted->concat_table ? std::move(*admitted->concat_table) : s.table;
    for (int t : op.inputs) ++child.facts[t].consumers;
    child.facts.push_back(new_tensor_facts(op, admitted->expr, admitted->classes, s.facts));
    child.last_key = std::move(key);
    child.ops = s.ops + 1;
    expand(child);
  });
}

void BlockSearch::try_close(const BlockState& s) {
  const BlockGraph& g = *s.graph;
  std::vector<int> outs, used_outputs;
  for (int t = 0; t < int(g.tensors().size()); ++t) {
    const bool is_input = t < int(inputs.size());
    const bool stored = !(g.tensor(t).phase == Phase::kBody && layout.forloop_range > 1);
    if (s.facts[t].consumers > 0) {
      if (!is_input && stored && is_target_output(s.facts[t].expr)) used_outputs.push_back(t);
      continue;
    }
    if (is_input) return;  // an unused input: the graph without it is enumerated too
    if (!stored) return;
    outs.push_back(t);
  }
  if (outs.empty()) return;
  close_with(s, outs);
  // A target output that the block graph also computes on from: a decode step's q
  // projection and its RoPE product cos * q. Only the dangling tensors were stored, so the
  // second output needed a second accumulator, cos * partial summed over the loop, which is
  // the same for finite values but NaN where cos is infinite and the partials change sign
  // (the adversarial checks dropped every such candidate, the fastest among them 2.4x
  // XLA). Storing the accumulator itself lets the product follow it in the epilogue.
  if (!used_outputs.empty()) {
    outs.insert(outs.end(), used_outputs.begin(), used_outputs.end());
    close_with(s, outs);
  }
}

bool BlockSearch::is_target_output(ExprId e) {
  if (!worker.pruner.enabled()) return false;
  for (int i = 0; i < int(shared.target.output_ids().size()); ++i) {
    if (worker.pruner.matches_output(e, i)) return true;
  }
  return false;
}

void BlockSearch::close_with(const BlockState& s, const std::vector<int>& outs) {
  if (int(outs.size()) > output_cap) return;
  std::vector<std::vector<Dim3>> omaps;
  for (int t : outs) {
    omaps.push_back(user_allowed_omaps(shared.config,
                                       output_omaps(layout, s.facts[t].classes, allow_partials)));
    if (omaps.back().empty()) return;
  }
  std::vector<Dim3> chosen;
  store_outputs(s, outs, omaps, 0, chosen);
}

void BlockSearch::store_outputs(const BlockState& s, const std::vector<int>& outs,
                                const std::vector<std::vector<Dim3>>& omaps, size_t i,
                                std::vector<Dim3>& chosen) {
  if (i < outs.size()) {
    for (const Dim3& o : omaps[i]) {
      chosen.push_back(o);
      store_outputs(s, outs, omaps, i + 1, chosen);
      chosen.pop_back();
    }
    return;
  }
  auto closed = std::make_shared<BlockGraph>(*s.graph);
  KernelState child = parent;
  child.table = s.table;
  std::vector<int> kouts;
  try {
    for (size_t k = 0; k < outs.size(); ++k) {
      closed->new_output(outs[k], chosen[k], s.graph->tensor(outs[k]).dtype);
    }
    const std::string hash = block_graph_hash(*closed);
    Op probe;
    probe.kind = OpKind::kCustomized;
    probe.inputs = inputs;
    OpKey key = OpKey::of(probe, hash);
    if (parent.last_key && !(*parent.last_key < key)) return;
    kouts = child.graph.customized(inputs, closed);
    child.last_key = std::move(key);
  } catch (const IrError&) {
    return;
  }
  for (int t : inputs) ++child.facts[t].consumers;
  for (size_t k = 0; k < outs.size(); ++k) {
    const TensorFacts& tile = s.facts[outs[k]];
    TensorFacts f = tile;
    f.consumers = 0;
    // A grid axis that stores along a dim of another index stacks partial results there.
    for (int a = 0; a < 3; ++a) {
      const int d = chosen[k][a];
      if (d >= 0 && f.classes[d] != layout.axis_class[a]) {
        // A later kernel sums the partials, which completes nothing but a partial sum.
        if (!worker.pruner.is_partial_sum(f.expr)) return;
        f.classes[d] = child.table.stacked_of(f.classes[d], layout.axis_class[a], layout.grid[a]);
      }
    }
    if (dedupes_values(shared.config) &&
        recomputes_existing(child.facts, f.expr, f.classes, worker.pruner)) {
      return;
    }
    child.facts.push_back(std::move(f));
  }
  child.ops = parent.ops + 1;
  child.block_graphs = parent.block_graphs + 1;
  on_close(std::move(child));
}

}  // namespace

void enumerate_block_graphs(const KernelState& parent, const std::vector<int>& inputs,
                            const BlockLayout& layout, SearchShared& shared, Worker& worker,
                            const std::function<void(KernelState&&)>& on_close) {
  int cap = block_output_cap(parent, inputs, shared);
  // Under the "attention" preset a block graph that makes no partial results ends the
  // candidate (search.h), so it stores exactly the target's outputs.
  if (preset_splits_reductions(shared.config) &&
      !splits_reduced_index(layout, shared.output_classes)) {
    cap = std::min(cap, int(shared.target.output_ids().size()));
  }
  if (cap < 1) return;
  BlockState s;
  s.table = parent.table;
  s.graph = std::make_shared<BlockGraph>(layout.grid, layout.forloop_range);
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = parent.graph.tensor(inputs[i]);
      s.graph->new_input(t.shape, t.dtype, layout.imaps[i], layout.fmaps[i]);
      const TensorFacts& kernel = parent.facts[inputs[i]];
      TensorFacts f = kernel;
      f.classes = tile_classes(kernel.classes, layout.fmaps[i], layout, parent.table);
      f.consumers = 0;
      s.facts.push_back(std::move(f));
    }
  } catch (const IrError&) {
    return;
  }
  BlockSearch search{parent, inputs, layout, shared, worker, on_close, {}};
  search.proposals.level = Level::kBlock;
  search.proposals.concat = shared.config.preset == "lora";
  search.proposals.online_softmax = preset_splits_reductions(shared.config);
  search.proposals.forloop_range = layout.forloop_range;
  search.proposals.scalars = shared.scalars;
  search.proposals.select_fills = shared.select_fills;
  search.proposals.max = shared.target_has_max;
  search.output_cap = cap;
  search.allow_partials = partials_allowed(shared.config, parent.ops);
  search.expand(s);
}

}  // namespace mj::search
