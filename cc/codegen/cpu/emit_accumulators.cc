#include "cc/codegen/cpu/emit_accumulators.h"

#include <string>

#include "cc/codegen/cpu/emit_compute.h"
#include "cc/codegen/cpu/index_loops.h"
#include "cc/codegen/cpu/scalar_exprs.h"
#include "cc/ir/op_kind.h"

namespace mj::codegen::cpu {

using common::CodeWriter;
using ir::BlockGraph;
using ir::is_accumulator;
using ir::Op;
using ir::OpKind;
using ir::Shape;

namespace {

std::string str(int64_t v) { return std::to_string(v); }
std::string arena_at(int64_t offset) { return "(arena + " + str(offset) + ")"; }
int64_t rows_of_matrix(const Shape& s) { return s.size() < 2 ? 1 : s[s.size() - 2]; }

bool reduces_last_dim(OpKind k) {
  return k == OpKind::kAccumSumLast || k == OpKind::kAccumMeanLast || k == OpKind::kAccumRmsLast;
}

// True when the accumulator's input is a matmul that already adds into its buffer.
bool fed_in_place(const BlockGraph& bg, const KernelPlan& plan, const Op& acc) {
  const int producer = bg.tensor(acc.inputs.at(0)).producer;
  return plan.matmul_adds_into_accum.at(producer);
}

void emit_sum_update(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan, const Op& acc) {
  const int x = acc.inputs.at(0);
  const std::string in = buffer_name(plan, x), out = buffer_name(plan, acc.outputs.at(0));
  const Shape& shape = bg.tensor(x).shape;
  if (acc.kind == OpKind::kAccumSum) {
    w.line("for (int64_t e = 0; e < " + str(element_count(shape)) + "; ++e) " + out +
           "[e] += " + in + "[e];");
    return;
  }
  const int64_t len = shape.back();
  const std::string sum = acc.kind == OpKind::kAccumRmsLast ? "row_sum_squares" : "row_sum";
  // This iteration's row total (vectorized partial sums), then onto the running value.
  w.open("for (int64_t r = 0; r < " + str(element_count(shape) / len) + "; ++r)");
  w.line(out + "[r] += mj_cpu::" + sum + "(" + in + " + r * " + str(len) + ", " + str(len) + ");");
  w.close();
}

void emit_softmax_update(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                         const SoftmaxGroup& g) {
  const Shape& s_shape = bg.tensor(g.s).shape;
  const int64_t len = s_shape.back(), rows = element_count(s_shape) / len;
  const std::string s = buffer_name(plan, g.s);
  const std::string max = arena_at(g.max_offset), scale = arena_at(g.scale_offset);
  const std::string probs = arena_at(g.probs_offset);
  w.open("for (int64_t r = 0; r < " + str(rows) + "; ++r)");
  w.line("const float* srow = " + s + " + r * " + str(len) + ";");
  w.line("const float m = mj_cpu::row_max(srow, " + str(len) + ", " + max + "[r]);");
  // Rows with no finite score yet hold no mass: keep them at zero instead of exp(nan).
  w.line("const bool empty = m == -std::numeric_limits<float>::infinity();");
  w.line(scale + "[r] = empty ? 1.0f : mj_cpu::exp_f32(" + max + "[r] - m);");
  w.line(max + "[r] = m;");
  w.line("float* prow = " + probs + " + r * " + str(len) + ";");
  w.line("for (int64_t j = 0; j < " + str(len) +
         "; ++j) prow[j] = empty ? 0.0f : mj_cpu::exp_f32(srow[j] - m);");
  w.close();
  for (int o : g.accum_ops) {
    const Op& acc = bg.ops()[o];
    const std::string out = buffer_name(plan, acc.outputs.at(0));
    if (acc.kind == OpKind::kAccumExpSumLast) {
      w.open("for (int64_t r = 0; r < " + str(rows) + "; ++r)");
      w.line(out + "[r] = " + out + "[r] * " + scale + "[r] + mj_cpu::row_sum(" + probs +
             " + r * " + str(len) + ", " + str(len) + ");");
      w.close();
    } else if (acc.kind == OpKind::kAccumExpMatmul) {
      const Shape& c_shape = bg.tensor(acc.outputs[0]).shape;
      const int rank = int(c_shape.size());
      const int64_t m = c_shape[rank - 2], n = c_shape[rank - 1];
      // Rescale every row of the running product by its row's factor; s's batch dims
      // broadcast onto the product's like the matmul's do.
      w.open("");
      {
        const Shape c_batch(c_shape.begin(), c_shape.end() - 2);
        const Shape s_batch(s_shape.begin(), s_shape.end() - 2);
        IndexLoops batches(w, c_batch, {s_batch}, "rb");
        w.open("for (int64_t i = 0; i < " + str(m) + "; ++i)");
        w.line("const float f = " + scale + "[(" + batches.operand_offset(0) + ") * " + str(m) +
               " + i];");
        w.line("float* crow = " + out + " + ((" + batches.result_offset() + ") * " + str(m) +
               " + i) * " + str(n) + ";");
        w.line("for (int64_t j = 0; j < " + str(n) + "; ++j) crow[j] *= f;");
        w.close();
      }
      w.close();
      const int v = acc.inputs.at(1);
      emit_batched_matmul(
          w, {probs, s_shape, len, rows_of_matrix(s_shape) * len},
          {buffer_name(plan, v), bg.tensor(v).shape, plan.row_stride[v], plan.matrix_stride[v]},
          {out, c_shape, n, m * n}, /*accumulate=*/true);
    }
  }
}

}  // namespace

void emit_accumulators_init(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan) {
  for (const Op& op : bg.ops()) {
    if (!is_accumulator(op.kind) || op.kind == OpKind::kAccumMaxLast) continue;
    const int t = op.outputs.at(0);
    w.line("std::fill_n(" + buffer_name(plan, t) + ", " + str(element_count(bg.tensor(t).shape)) +
           ", 0.0f);");
  }
  for (const SoftmaxGroup& g : plan.softmax_groups) {
    const Shape& s = bg.tensor(g.s).shape;
    w.line("std::fill_n(" + arena_at(g.max_offset) + ", " + str(element_count(s) / s.back()) +
           ", -std::numeric_limits<float>::infinity());");
  }
}

void emit_accumulators_update(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan) {
  for (const Op& op : bg.ops()) {
    const bool summed = op.kind == OpKind::kAccumSum || reduces_last_dim(op.kind);
    if (summed && !(op.kind == OpKind::kAccumSum && fed_in_place(bg, plan, op))) {
      w.open("");
      emit_sum_update(w, bg, plan, op);
      w.close();
    }
  }
  for (const SoftmaxGroup& g : plan.softmax_groups) {
    w.open("");
    emit_softmax_update(w, bg, plan, g);
    w.close();
  }
}

void emit_accumulator_finish(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                             size_t op_index) {
  const Op& op = bg.ops()[op_index];
  const int t = op.outputs.at(0);
  const std::string out = buffer_name(plan, t);
  const int64_t rows = element_count(bg.tensor(t).shape);
  if (op.kind == OpKind::kAccumMeanLast || op.kind == OpKind::kAccumRmsLast) {
    const int64_t count = int64_t(bg.forloop_range()) * bg.tensor(op.inputs[0]).shape.back();
    const std::string mean = out + "[r] / " + float_literal(double(count));
    const std::string value = op.kind == OpKind::kAccumMeanLast
                                  ? mean
                                  : "std::sqrt(" + mean + " + " + float_literal(op.scalar) + ")";
    w.line("for (int64_t r = 0; r < " + str(rows) + "; ++r) " + out + "[r] = " + value + ";");
  } else if (op.kind == OpKind::kAccumMaxLast) {
    const SoftmaxGroup& g = plan.softmax_groups.at(plan.softmax_group_of.at(op_index));
    w.line("std::copy_n(" + arena_at(g.max_offset) + ", " + str(rows) + ", " + out + ");");
  }
}

}  // namespace mj::codegen::cpu
