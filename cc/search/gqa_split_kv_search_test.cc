// Under the "attention" preset with two kernel ops, the search once rediscovered the paper's
// split-KV μGraph for GQA unaided: a kernel whose grid splits the keys, each block walking its
// slice and storing partial exp(S)·V sums and partial exp(S) row sums, and a combine kernel
// that sums them and divides. Its exps have no max stabilizer: it overflows for logits above
// about 88 and divides 0 by 0 on masked rows, so the verifier now rejects it and the search
// no longer builds it (docs/ir-semantics.md, "Numerical safety"). The stabilized split form
// (paper_graphs.gqa_prefill: per-slice online softmax storing its maxima, a kernel-level max
// of the maxima, a combine that rescales by exp(m_b - M)) needs accum_max_last stores, a
// max over the stacked slices and a seven-op combine kernel, beyond what this search
// enumerates; under the same limits it finds the one-kernel online softmax instead.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cc/ir/print.h"
#include "cc/search/search.h"
#include "cc/search/search_test_graphs.h"
#include "cc/verify/float_safety.h"

namespace mj::search {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::to_string;

namespace {

using search_test::count_ops;

std::vector<const Op*> customized_ops(const KernelGraph& g) {
  std::vector<const Op*> ops;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kCustomized) ops.push_back(&op);
  }
  return ops;
}

int predefined_ops(const KernelGraph& g) {
  int n = 0;
  for (const Op& op : g.ops()) {
    n += op.kind != OpKind::kInput && op.kind != OpKind::kOutput && op.kind != OpKind::kCustomized;
  }
  return n;
}

// The op of a block graph that declares input i / stores output i.
const Op& io_op(const BlockGraph& g, OpKind kind, int i) {
  for (const Op& op : g.ops()) {
    if (op.kind == kind && op.io_index == i) return op;
  }
  throw std::logic_error("no such input or output");
}

// Why g is not the paper's unstabilized split-KV μGraph for attention(Q, K, V) with K as
// [.., d, kv] and V as [.., kv, d], or "" when it is.
std::string split_kv_mismatch(const KernelGraph& g) {
  const auto custom = customized_ops(g);
  if (custom.size() != 2 || predefined_ops(g) != 0) return "not two customized ops";
  const Op& k1 = *custom[0];
  const Op& k2 = *custom[1];
  const BlockGraph& b1 = *k1.block_graph;
  const BlockGraph& b2 = *k2.block_graph;
  const auto& in = g.input_ids();
  if (k1.inputs != std::vector<int>{in[0], in[1], in[2]}) return "kernel 1 does not read Q, K, V";
  // The grid axis splitting the keys: K's last dim and V's second to last, together.
  const Op& k_in = io_op(b1, OpKind::kInput, 1);
  const Op& v_in = io_op(b1, OpKind::kInput, 2);
  const int kv_k = int(g.tensor(in[1]).shape.size()) - 1;
  const int kv_v = int(g.tensor(in[2]).shape.size()) - 2;
  int axis = -1;
  for (int a = 0; a < 3; ++a) {
    if (b1.grid()[a] > 1 && k_in.imap[a] == kv_k && v_in.imap[a] == kv_v) axis = a;
  }
  if (axis < 0) return "no grid axis of kernel 1 splits the keys";
  const int splits = b1.grid()[axis];
  if (b1.forloop_range() < 2 || k_in.fmap != kv_k || v_in.fmap != kv_v) {
    return "kernel 1 does not loop over its key slice";
  }
  if (count_ops(b1, OpKind::kAccumExpMatmul) + count_ops(b1, OpKind::kAccumExpSumLast) != 0 ||
      count_ops(b1, OpKind::kExp) != 1) {
    return "kernel 1 does not use a plain exp";
  }
  if (b1.output_ids().size() != 2 || k1.outputs.size() != 2) return "kernel 1 stores not 2 tensors";
  if (k2.inputs != k1.outputs) return "kernel 2 does not read both partials";
  if (b2.forloop_range() != splits) return "kernel 2 does not loop once per partial";
  for (int i = 0; i < 2; ++i) {
    const int stacked = io_op(b1, OpKind::kOutput, i).omap[axis];
    if (stacked < 0) return "a partial is not stored side by side";
    if (io_op(b2, OpKind::kInput, i).fmap != stacked) {
      return "kernel 2 does not walk the stacked dim of partial " + std::to_string(i);
    }
  }
  return "";
}

bool is_online_softmax_kernel(const KernelGraph& g) {
  const BlockGraph* bg = search_test::single_block_graph(g);
  return bg && bg->forloop_range() > 1 && count_ops(*bg, OpKind::kAccumExpMatmul) == 1 &&
         count_ops(*bg, OpKind::kAccumExpSumLast) == 1;
}

TEST(GqaSplitKvSearch, NeverReturnsTheUnstabilizedSplitFormAndStillFuses) {
  // The query heads of a KV head folded into 16 rows, as in gqa_prefill (paper_graphs.py).
  const int64_t q = 16, d = 8, kv = 64;
  const KernelGraph target =
      search_test::attention(q, d, kv, /*heads=*/1, 1.0 / std::sqrt(double(d)));
  SearchConfig c = search_test::small_config();
  c.preset = "attention";
  c.time_budget_s = 100;
  c.max_kernel_ops = 2;  // the split-KV kernel and the combine kernel
  c.max_block_graphs = 2;
  c.max_block_ops = 6;  // Q·K, scale, exp, E·V, two accumulators
  c.max_block_outputs = 2;
  c.max_grid_axes = 1;     // splitting the keys alone shows the structure
  c.max_block_inputs = 3;  // Q, K, V; or the two partials
  c.max_grids = 1;
  c.max_forloop_ranges = 1;
  const auto start = std::chrono::steady_clock::now();
  const SearchResult r = search(target, c);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s; %zu candidates; %.2f s wall\n", r.stats.to_string().c_str(), r.candidates.size(),
              secs);
  EXPECT_EQ(r.reason, "");
  const KernelGraph* online = nullptr;
  for (const auto& cand : r.candidates) {
    EXPECT_NE(split_kv_mismatch(*cand), "") << "the unstabilized split form:\n" << to_string(*cand);
    EXPECT_FALSE(verify::has_unbounded_exp(*cand)) << to_string(*cand);
    if (!online && is_online_softmax_kernel(*cand)) online = cand.get();
  }
  ASSERT_NE(online, nullptr) << "no fused online-softmax candidate";
  std::printf("the online-softmax candidate:\n%s\n", to_string(*online).c_str());
  EXPECT_LT(search_test::float_mismatch(target, *online), 1e-9);
}

TEST(GqaSplitKvSearch, TheStructureCheckRejectsTheOnlineSoftmaxKernel) {
  // The single-kernel FlashAttention form is not the split-KV μGraph; the predicate above
  // must be able to say no.
  KernelGraph g;
  const int qt = g.new_input({1, 16, 8}, DType::kF32);
  const int kt = g.new_input({1, 8, 64}, DType::kF32);
  const int vt = g.new_input({1, 64, 8}, DType::kF32);
  auto bg = std::make_shared<BlockGraph>(Dim3{2, 1, 1}, 4);
  const int bq = bg->new_input({1, 16, 8}, DType::kF32, {1, -1, -1}, -1);
  const int bk = bg->new_input({1, 8, 64}, DType::kF32, {-1, -1, -1}, 2);
  const int bv = bg->new_input({1, 64, 8}, DType::kF32, {-1, -1, -1}, 1);
  const int s = bg->matmul(bq, bk);
  const int o = bg->binary(OpKind::kDiv, bg->accum_exp_matmul(s, bv),
                           bg->accum(OpKind::kAccumExpSumLast, s, 0));
  bg->new_output(o, {1, -1, -1}, DType::kF32);
  g.mark_output(g.customized({qt, kt, vt}, bg).at(0));
  EXPECT_EQ(split_kv_mismatch(g), "not two customized ops");
}

}  // namespace
}  // namespace mj::search
