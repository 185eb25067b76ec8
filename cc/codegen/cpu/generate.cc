#include "cc/codegen/cpu/generate.h"

#include <algorithm>
#include <optional>

#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/common/kernel_symbol.h"
#include "cc/codegen/cpu/emit_accumulators.h"
#include "cc/codegen/cpu/emit_compute.h"
#include "cc/codegen/cpu/emit_entry.h"
#include "cc/codegen/cpu/emit_tile_io.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/codegen/cpu/loop_steps.h"
#include "cc/codegen/cpu/prelude.h"
#include "cc/ir/coarsen_loop.h"
#include "cc/ir/error.h"
#include "cc/ir/hash.h"
#include "cc/ir/op_kind.h"

namespace mj::codegen::cpu {

using common::CodeWriter;
using common::phase_of;
using ir::block_graph_hash;
using ir::BlockGraph;
using ir::Dim3;
using ir::IrError;
using ir::is_accumulator;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Shape;

namespace {

// Everything an op of `phase` computes, in op order: input loads and fused passes. Inputs
// and passes of other phases, accumulators and stores are emitted elsewhere.
void emit_phase(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan, Phase phase) {
  const std::vector<Op>& ops = bg.ops();
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind == OpKind::kOutput || is_accumulator(op.kind) || phase_of(bg, op) != phase) {
      continue;
    }
    if (op.kind == OpKind::kInput) {
      emit_input_load(w, bg, plan, op);
    } else if (!plan.pass_ending_at[o].empty()) {
      emit_pass(w, bg, plan, plan.pass_ending_at[o]);
    }
  }
}

void emit_buffers(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan) {
  for (size_t t = 0; t < bg.tensors().size(); ++t) {
    const std::string name = "t" + std::to_string(t);
    if (plan.read_in_place[t]) {
      w.line("[[maybe_unused]] const " + std::string(in_place_type(bg, int(t))) + "* " + name +
             " = nullptr;");
    } else if (plan.arena_offset[t] >= 0) {
      w.line("[[maybe_unused]] float* const " + name + " = arena + " +
             std::to_string(plan.arena_offset[t]) + ";");
    }
  }
}

// Names block `g` of the task's group: its index, arena slice and buffers. Input tiles read
// in place are pointers into the kernel tensors, set again in every loop over the group, so
// no state but the arena crosses loops.
void open_block(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan) {
  const Dim3& grid = bg.grid();
  w.line("const int64_t block = task * " + std::to_string(plan.block_group) + " + g;");
  w.line("float* const arena = arenas + g * " + std::to_string(plan.arena_floats) + ";");
  // Block index flattened with x fastest.
  w.line("[[maybe_unused]] const int64_t bx = block % " + std::to_string(grid[0]) + ";");
  w.line("[[maybe_unused]] const int64_t by = block / " + std::to_string(grid[0]) + " % " +
         std::to_string(grid[1]) + ";");
  w.line("[[maybe_unused]] const int64_t bz = block / " + std::to_string(grid[0] * grid[1]) + ";");
  emit_buffers(w, bg, plan);
}

// Opens a loop over the blocks of the task's group (a plain scope for a group of one) and
// names the current block; the caller closes it.
void open_group_loop(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan) {
  if (plan.block_group == 1) {
    w.open("");
    w.line("const int64_t g = 0;");
  } else {
    w.open("for (int64_t g = 0; g < " + std::to_string(plan.block_group) + "; ++g)");
  }
  open_block(w, bg, plan);
}

// Input tiles read in place (of the invariant phase, or of both phases inside the for-loop):
// pointers, set again in each loop that may use them.
void emit_in_place_pointers(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                            bool with_body) {
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kInput || !plan.read_in_place[op.outputs.at(0)]) continue;
    const Phase phase = phase_of(bg, op);
    if (phase == Phase::kInvariant || (with_body && phase == Phase::kBody)) {
      emit_input_load(w, bg, plan, op);
    }
  }
}

// How far ahead a group matmul prefetches B, in rows: it streams the group's B as long rows,
// kKChunk (8) at a time, so two chunks ahead is in flight in time without crowding L2.
constexpr int64_t kGroupPrefetchRows = 16;

// A group matmul (plan.group_matmul), once for the task's whole block group, with the
// operands of the group's first block.
void emit_group_matmul(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                       size_t op_index) {
  const Op& op = bg.ops()[op_index];
  const int a = op.inputs[0], b = op.inputs[1], c = op.outputs[0];
  const Shape& a_shape = bg.tensor(a).shape;
  const Shape& c_shape = bg.tensor(c).shape;
  const int64_t m = c_shape[c_shape.size() - 2], n = c_shape.back(), k = a_shape.back();
  auto str = [](int64_t v) { return std::to_string(v); };
  w.line("mj_cpu::matmul_group<" + str(m) + ", " + str(k) + ", " + str(n) + ", " +
         str(plan.block_group) + ", " + str(plan.row_stride[a]) + ", " + str(plan.row_stride[b]) +
         ", " + str(n) + ", " + str(plan.arena_floats) + ", " +
         str(std::min(plan.next_iteration_offset[b], kGroupPrefetchRows * plan.row_stride[b])) +
         ", true>(" + buffer_name(plan, a) + ", " + buffer_name(plan, b) + ", " +
         buffer_name(plan, c) + ");");
}

// The for-loop body: ops in order, each block of the group in turn, except that a group
// matmul runs once for the group where it stands, after every block has computed what
// precedes it.
void emit_body(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan) {
  const std::vector<Op>& ops = bg.ops();
  bool in_group_loop = false;
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind == OpKind::kOutput || is_accumulator(op.kind) || phase_of(bg, op) != Phase::kBody) {
      continue;
    }
    if (plan.group_matmul[o]) {
      if (in_group_loop) w.close();
      in_group_loop = false;
      w.open("");
      w.line("// one product for the whole group");
      w.line("const int64_t g = 0;");
      open_block(w, bg, plan);
      emit_in_place_pointers(w, bg, plan, /*with_body=*/true);
      emit_group_matmul(w, bg, plan, o);
      w.close();
      continue;
    }
    if (op.kind != OpKind::kInput && plan.pass_ending_at[o].empty()) continue;
    if (!in_group_loop) {
      open_group_loop(w, bg, plan);
      emit_in_place_pointers(w, bg, plan, /*with_body=*/true);
      in_group_loop = true;
    }
    if (op.kind != OpKind::kInput) {
      emit_pass(w, bg, plan, plan.pass_ending_at[o]);
    } else if (!plan.read_in_place[op.outputs.at(0)]) {  // else set when the loop opened
      emit_input_load(w, bg, plan, op);
    }
  }
  if (!in_group_loop) {
    // After a group matmul: a new loop, whose accumulators may read inputs in place.
    open_group_loop(w, bg, plan);
    emit_in_place_pointers(w, bg, plan, /*with_body=*/true);
  }
  emit_accumulators_update(w, bg, plan);
  w.close();
}

// One task: plan.block_group consecutive blocks, whose for-loops run in lockstep (every
// block's iteration `it` before any block's `it + 1`). Blocks are independent, so this order
// computes exactly what one block after another would.
void emit_run_blocks(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan) {
  w.open("void run_blocks(const Io& io, float* arenas, int64_t task)");
  open_group_loop(w, bg, plan);
  w.line("// loop-invariant tiles");
  emit_phase(w, bg, plan, Phase::kInvariant);
  emit_accumulators_init(w, bg, plan);
  w.close();
  w.open("for (int64_t it = 0; it < " + std::to_string(bg.forloop_range()) + "; ++it)");
  emit_body(w, bg, plan);
  w.close();
  open_group_loop(w, bg, plan);
  emit_in_place_pointers(w, bg, plan, /*with_body=*/false);
  w.line("// epilogue");
  const std::vector<Op>& ops = bg.ops();
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (is_accumulator(op.kind)) {
      emit_accumulator_finish(w, bg, plan, o);
    } else if (op.kind != OpKind::kInput && op.kind != OpKind::kOutput &&
               phase_of(bg, op) == Phase::kEpilogue && !plan.pass_ending_at[o].empty()) {
      emit_pass(w, bg, plan, plan.pass_ending_at[o]);
    }
  }
  w.line("// stores");
  for (const Op& op : ops) {
    if (op.kind == OpKind::kOutput) emit_output_store(w, bg, plan, op);
  }
  w.close();
  w.close();
}

}  // namespace

std::string cpu_kernel_symbol(const BlockGraph& bg) {
  return common::kernel_symbol("mj_cpu_", loop_form(bg));
}

std::string generate_cpu_kernel(const BlockGraph& graph, const std::string& symbol) {
  common::check_symbol(symbol, "generate_cpu_kernel");
  // The loop as it runs (loop_form), its factor said in the code only where it applied.
  const int factor = step_factor(graph);
  const std::optional<BlockGraph> coarse = ir::coarsen_loop(graph, factor);
  const BlockGraph& bg = coarse ? *coarse : graph;
  const KernelPlan plan = plan_kernel(bg);
  const std::string ns = symbol + "_kernel";
  CodeWriter w;
  // The searched graph's own hash stays out of the code: graphs of one loop form share it.
  w.line(
      "// Generated by mirage_jax (cc/codegen/cpu) for block graph " + block_graph_hash(bg) +
      ": grid (" + std::to_string(bg.grid()[0]) + ", " + std::to_string(bg.grid()[1]) + ", " +
      std::to_string(bg.grid()[2]) + "), forloop_range " + std::to_string(bg.forloop_range()) +
      (coarse ? " (" + std::to_string(factor) + " steps of the searched loop an iteration)" : "") +
      ".");
  w.raw(cpu_prelude());
  w.line("");
  w.open("namespace " + ns);
  w.open("namespace");
  emit_io_struct(w, bg);
  w.line("");
  emit_run_blocks(w, bg, plan);
  w.line("");
  emit_task(w);
  w.close("  // namespace");
  w.close("  // namespace " + ns);
  w.line("");
  emit_entry(w, bg, plan, symbol, ns);
  return w.str();
}

}  // namespace mj::codegen::cpu
