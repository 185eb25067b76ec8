#include "cc/codegen/cpu/loop_steps.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "cc/codegen/common/kernel_symbol.h"
#include "cc/ir/append_op.h"
#include "cc/ir/coarsen_loop.h"
#include "cc/ir/hash.h"
#include "cc/ir/op_kind.h"

namespace mj::codegen::cpu {

using common::phase_of;
using ir::BlockGraph;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Shape;

namespace {

// The rows of k the prelude's products take per pass over their accumulator. Products of up
// to kMaxPanelRows rows stream B kKChunk (8) rows at a time: SwiGLU + down's first kernel
// over [4, 5504] weight tiles (4096 / 1024 steps) ran 1.07-1.16x the time of the same kernel
// over 8-row steps, which the cost model prices the same (benchmarks/ranking_replay.py,
// 2026-12-07). Taller ones pack kComputeKChunk (128) rows of B at a time: [256, 1024] @
// [1024, 1024] over 2 blocks ran 1.53x / 1.13x / 1.07x the time of 128-row steps with steps
// of 8 / 16 / 32 rows (benchmarks/gemv_tiles.py --warm, 2026-12-07), and as fast once
// coarsened.
constexpr int64_t kPanelRows = 8;     // mj_cpu::kMaxPanelRows
constexpr int64_t kPanelStep = 8;     // mj_cpu::kKChunk
constexpr int64_t kPackedStep = 128;  // mj_cpu::kComputeKChunk

// bg with its inputs in the order `order` names (input i of the result is bg's order[i]):
// kernels that read the same tensors through a permuted argument list run the same code.
BlockGraph inputs_in_order(const BlockGraph& bg, const std::vector<int>& order) {
  BlockGraph out(bg.grid(), bg.forloop_range());
  std::vector<int> id(bg.tensors().size(), -1);
  std::vector<const Op*> input_op(bg.num_inputs(), nullptr);
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kInput) input_op.at(op.io_index) = &op;
  }
  for (int i : order) ir::copy_block_op(bg, *input_op.at(i), out, id);
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kInput) ir::copy_block_op(bg, op, out, id);
  }
  return out;
}

}  // namespace

int step_factor(const BlockGraph& bg) {
  double need = 1;  // the factor each product asks for, the most of them
  bool products = false;
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kMatmul || phase_of(bg, op) != Phase::kBody) continue;
    const Shape& c = bg.tensor(op.outputs[0]).shape;
    const int64_t k = bg.tensor(op.inputs[0]).shape.back();
    const int64_t rows = c.size() < 2 ? 1 : c[c.size() - 2];
    need = std::max(need, double(rows <= kPanelRows ? kPanelStep : kPackedStep) / double(k));
    products = true;
  }
  if (!products || need <= 1 || !ir::loop_coarsens(bg)) return 1;
  int factor = 1;
  for (int u = 2; u <= bg.forloop_range(); ++u) {
    if (bg.forloop_range() % u != 0) continue;
    factor = u;
    if (u >= need) break;
  }
  return factor;
}

BlockGraph loop_form(const BlockGraph& bg) {
  std::optional<BlockGraph> coarse = ir::coarsen_loop(bg, step_factor(bg));
  return coarse ? *std::move(coarse) : bg;
}

std::string cpu_code_hash(const ir::KernelGraph& g) {
  ir::KernelGraph out;
  std::vector<int> id(g.tensors().size(), -1);
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::kCustomized) {
      ir::copy_kernel_op(g, op, out, id);
      continue;
    }
    // The kernel's arguments in the order of the tensors they are, not of the search's
    // choice: QKNorm + GQA's two best candidates differed only in that.
    std::vector<int> order(op.inputs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return id.at(op.inputs[a]) < id.at(op.inputs[b]); });
    std::vector<int> inputs;
    for (int i : order) inputs.push_back(id.at(op.inputs[i]));
    const std::vector<int> outputs = out.customized(
        inputs, std::make_shared<BlockGraph>(inputs_in_order(loop_form(*op.block_graph), order)));
    for (size_t i = 0; i < outputs.size(); ++i) id.at(op.outputs[i]) = outputs[i];
  }
  return ir::graph_hash(out);
}

}  // namespace mj::codegen::cpu
