#include "cc/codegen/cpu/emit_compute.h"

#include "cc/codegen/cpu/index_loops.h"
#include "cc/codegen/cpu/scalar_exprs.h"
#include "cc/ir/error.h"
#include "cc/ir/op_kind.h"

namespace mj::codegen::cpu {

using common::CodeWriter;
using ir::BlockGraph;
using ir::IrError;
using ir::is_accumulator;
using ir::is_elementwise;
using ir::is_unary_elementwise;
using ir::Op;
using ir::op_kind_name;
using ir::OpKind;
using ir::ReduceKind;
using ir::Shape;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Rows up to this long end their sums kVecFloats rows at a time (mj_cpu::RowSums); a longer
// row's own lane sum is a small part of its time.
constexpr int64_t kShortRow = 256;

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// The value of one elementwise op inside a pass: `chained` is the tensor whose value is the
// register `v` (-1 for the head), `operand_at` gives each other operand's element.
std::string elementwise_expr(const Op& op, int chained,
                             const std::vector<std::string>& operand_exprs) {
  std::vector<std::string> args;
  size_t next = 0;
  for (int t : op.inputs) args.push_back(t == chained ? "v" : operand_exprs.at(next++));
  if (is_unary_elementwise(op.kind)) return unary_expr(op.kind, op.scalar, args.at(0));
  // A matmul here is an outer product (k of 1, KernelPlan::reduce_prologue): one product.
  const OpKind kind = op.kind == OpKind::kMatmul ? OpKind::kMul : op.kind;
  return binary_expr(kind, op.scalar, args.at(0), args.at(1));
}

// The operands a chain of elementwise ops reads from outside itself, in the order it reads
// them; `chained` is the value flowing into the chain's first member (-1 for none).
struct ChainOperands {
  std::vector<Shape> shapes;
  std::vector<std::string> buffers;
};

ChainOperands chain_operands(const BlockGraph& bg, const KernelPlan& plan,
                             const std::vector<int>& chain, int chained) {
  ChainOperands operands;
  for (int o : chain) {
    for (int t : bg.ops()[o].inputs) {
      if (t == chained) continue;
      operands.shapes.push_back(bg.tensor(t).shape);
      operands.buffers.push_back(buffer_name(plan, t));
    }
    chained = bg.ops()[o].outputs[0];
  }
  return operands;
}

// Writes `v = ...;` for each member of the chain in turn, its outside operands read at
// `operand_exprs` (parallel to chain_operands' order).
void emit_chain_values(CodeWriter& w, const BlockGraph& bg, const std::vector<int>& chain,
                       int chained, const std::vector<std::string>& operand_exprs) {
  size_t next = 0;
  for (int o : chain) {
    const Op& op = bg.ops()[o];
    std::vector<std::string> mine;
    for (int t : op.inputs) {
      if (t != chained) mine.push_back(operand_exprs.at(next++));
    }
    w.line("v = " + elementwise_expr(op, chained, mine) + ";");
    chained = op.outputs[0];
  }
}

const char* reduce_init(const Op& op) {
  return op.reduce == ReduceKind::kMax ? "-std::numeric_limits<float>::infinity()" : "0.0f";
}

// Whether a last-dim sum's chain is one product of two rows that both run the whole
// reduced dim (neither stretched along it): a dot product per result.
bool is_row_dot(const BlockGraph& bg, const std::vector<int>& prologue,
                const ChainOperands& operands, int64_t len) {
  if (prologue.size() != 1 || bg.ops()[prologue[0]].kind != OpKind::kMul) return false;
  if (operands.buffers.size() != 2) return false;
  for (const Shape& s : operands.shapes) {
    if (s.empty() || s.back() != len) return false;
  }
  return true;
}

// A last-dim reduce whose input is an elementwise chain (KernelPlan::reduce_prologue): the
// loops run over the rows; each row's chain values go to a stack row, summed or maxed there
// with vector lanes (short rows' sums finish kVecFloats rows at a time: mj_cpu::RowSums).
// An operand's element (row r, j) is at r's offset in the operand without its last dim,
// times that dim, plus j where the dim is not stretched.
void emit_fused_row_reduce(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                           const Op& op, const std::vector<int>& prologue, const std::string& out) {
  const Shape& x_shape = bg.tensor(op.inputs.at(0)).shape;
  const int64_t len = x_shape.back();
  const bool batched = op.reduce != ReduceKind::kMax && len <= kShortRow;
  const std::string divisor = float_literal(op.reduce == ReduceKind::kMean ? double(len) : 1.0);
  ChainOperands operands = chain_operands(bg, plan, prologue, -1);
  const bool dot = batched && is_row_dot(bg, prologue, operands, len);
  std::vector<Shape> rows_of;
  for (const Shape& s : operands.shapes) {
    rows_of.push_back(s.empty() ? s : Shape(s.begin(), s.end() - 1));
  }
  w.open("");
  if (batched) w.line(dot ? "mj_cpu::DotSums sums;" : "mj_cpu::RowSums sums;");
  {
    IndexLoops loops(w, Shape(x_shape.begin(), x_shape.end() - 1), rows_of, "e");
    std::vector<std::string> operand_exprs;
    for (size_t i = 0; i < operands.buffers.size(); ++i) {
      const Shape& s = operands.shapes[i];
      const int64_t width = s.empty() ? 1 : s.back();
      const std::string at = "(" + loops.operand_offset(i) + ") * " + str(width);
      operand_exprs.push_back(operands.buffers[i] + "[" + at + (width > 1 ? " + j" : "") + "]");
    }
    const std::string dst = out + "[" + loops.result_offset() + "]";
    if (dot) {
      auto row_of = [&](size_t i) {
        return operands.buffers[i] + " + (" + loops.operand_offset(i) + ") * " + str(len);
      };
      w.line("sums.add_dot(" + row_of(0) + ", " + row_of(1) + ", " + str(len) + ", &" + dst + ", " +
             divisor + ");");
    } else {
      w.line("alignas(64) float row[" + str(len) + "];");
      w.open("for (int64_t j = 0; j < " + str(len) + "; ++j)");
      w.line("float v;");
      emit_chain_values(w, bg, prologue, -1, operand_exprs);
      w.line("row[j] = v;");
      w.close();
      if (batched) {
        w.line("sums.add(row, " + str(len) + ", &" + dst + ", " + divisor + ");");
      } else if (op.reduce == ReduceKind::kMax) {
        w.line(dst + " = mj_cpu::row_max(row, " + str(len) + ", " + reduce_init(op) + ");");
      } else if (op.reduce == ReduceKind::kMean) {
        w.line(dst + " = mj_cpu::row_mean(row, " + str(len) + ");");
      } else {
        w.line(dst + " = mj_cpu::row_sum(row, " + str(len) + ");");
      }
    }
  }
  if (batched) w.line("sums.flush(" + divisor + ");");
  w.close();
}

// emit_fused_reduce's loops with the reduced dim moved just outside the innermost kept dim
// `inner`: each row of results along `inner` is folded in a stack row over the reduced dim,
// then stored once. A stack row aliases no tile, where a result tile in the arena might alias
// the chain's operands and is re-read and re-written per term behind run-time alias checks.
// Measured on decode's P @ V kernels (two candidates per region, both forms in one process,
// cold inputs): GPT-2's at batch 4 0.169 ms against 0.204 and 0.247 against 0.236, the
// others (GPT-2 at batch 8, Llama at 4 and 8) equal within 3%.
void emit_fused_reduce_in_row(CodeWriter& w, const BlockGraph& bg, const std::vector<int>& prologue,
                              const Op& op, const ChainOperands& operands, int inner,
                              const std::string& out) {
  const Shape& x_shape = bg.tensor(op.inputs.at(0)).shape;
  const int64_t len = x_shape[op.dim], width = x_shape[inner];
  IndexLoops loops(w, x_shape, operands.shapes, "e", {op.dim, inner});
  const std::vector<int64_t>& along = loops.left_strides(0);
  const std::vector<int64_t>& across = loops.left_strides(1);
  std::vector<std::string> operand_exprs;  // each one's element at (r, j)
  for (size_t i = 0; i < operands.buffers.size(); ++i) {
    operand_exprs.push_back(operands.buffers[i] + "[" + loops.operand_offset(i) + " + r * " +
                            str(along[i + 1]) + " + j * " + str(across[i + 1]) + "]");
  }
  const size_t folded = operands.buffers.size();  // the result, stretched along the reduce
  const std::string dst =
      out + "[" + loops.operand_offset(folded) + " + j * " + str(across[folded + 1]) + "]";
  w.line("alignas(64) float row[" + str(width) + "];");
  w.line("for (int64_t j = 0; j < " + str(width) + "; ++j) row[j] = " + reduce_init(op) + ";");
  w.open("for (int64_t r = 0; r < " + str(len) + "; ++r)");
  w.open("for (int64_t j = 0; j < " + str(width) + "; ++j)");
  w.line("float v;");
  emit_chain_values(w, bg, prologue, -1, operand_exprs);
  w.line(op.reduce == ReduceKind::kMax ? "row[j] = mj_cpu::max_of(row[j], v);"
                                       : "row[j] = row[j] + v;");
  w.close();
  w.close();
  const std::string divisor =
      op.reduce == ReduceKind::kMean ? " / " + float_literal(double(len)) : "";
  w.line("for (int64_t j = 0; j < " + str(width) + "; ++j) " + dst + " = row[j]" + divisor + ";");
}

// A reduce over a dim other than the last whose input is an elementwise chain (see
// KernelPlan::reduce_prologue): one loop nest over the input's shape evaluates the chain and
// folds each value into its result element. The innermost loop runs along a kept dim, so
// the folds of consecutive iterations are independent and vectorize.
void emit_fused_reduce(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan, const Op& op,
                       const std::vector<int>& prologue, const std::string& out) {
  const Shape& x_shape = bg.tensor(op.inputs.at(0)).shape;
  if (op.dim + 1 == int(x_shape.size())) {
    emit_fused_row_reduce(w, bg, plan, op, prologue, out);
    return;
  }
  const Shape& out_shape = bg.tensor(op.outputs.at(0)).shape;
  ChainOperands operands = chain_operands(bg, plan, prologue, -1);
  Shape folded = x_shape;  // the result, stretched along the reduced dim
  folded[op.dim] = 1;
  operands.shapes.push_back(folded);
  int inner = int(x_shape.size()) - 1;  // the innermost kept dim longer than 1
  while (inner > op.dim && x_shape[inner] == 1) --inner;
  if (inner > op.dim && x_shape[inner] <= kMaxStackRowFloats) {
    emit_fused_reduce_in_row(w, bg, prologue, op, operands, inner, out);
    return;
  }
  w.line("for (int64_t e = 0; e < " + str(element_count(out_shape)) + "; ++e) " + out +
         "[e] = " + reduce_init(op) + ";");
  {
    IndexLoops loops(w, x_shape, operands.shapes, "e");
    std::vector<std::string> operand_exprs;
    for (size_t i = 0; i < operands.buffers.size(); ++i) {
      operand_exprs.push_back(operands.buffers[i] + "[" + loops.operand_offset(i) + "]");
    }
    w.line("float v;");
    emit_chain_values(w, bg, prologue, -1, operand_exprs);
    const std::string dst = out + "[" + loops.operand_offset(operands.buffers.size()) + "]";
    w.line(op.reduce == ReduceKind::kMax ? dst + " = mj_cpu::max_of(" + dst + ", v);"
                                         : dst + " += v;");
  }
  if (op.reduce == ReduceKind::kMean) {
    w.line("for (int64_t e = 0; e < " + str(element_count(out_shape)) + "; ++e) " + out +
           "[e] = " + out + "[e] / " + float_literal(double(x_shape[op.dim])) + ";");
  }
}

void emit_reduce(CodeWriter& w, const Shape& x_shape, const std::string& x, const Op& op,
                 const std::string& out) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < op.dim; ++d) outer *= x_shape[d];
  for (size_t d = op.dim + 1; d < x_shape.size(); ++d) inner *= x_shape[d];
  const int64_t len = x_shape[op.dim];
  const bool is_max = op.reduce == ReduceKind::kMax;
  const std::string init = reduce_init(op);
  w.open("for (int64_t o = 0; o < " + str(outer) + "; ++o)");
  w.line("const float* src = " + x + " + o * " + str(len * inner) + ";");
  w.line("float* dst = " + out + " + o * " + str(inner) + ";");
  if (inner == 1) {
    // Over the last dim: one contiguous row, reduced with vectorized partial results.
    const char* row_reduce = is_max                           ? "row_max"
                             : op.reduce == ReduceKind::kMean ? "row_mean"
                                                              : "row_sum";
    w.line("dst[0] = mj_cpu::" + std::string(row_reduce) + "(src, " + str(len) +
           (is_max ? ", " + init : "") + ");");
    w.close();
    return;
  }
  w.line("for (int64_t i = 0; i < " + str(inner) + "; ++i) dst[i] = " + init + ";");
  w.open("for (int64_t r = 0; r < " + str(len) + "; ++r)");
  w.open("for (int64_t i = 0; i < " + str(inner) + "; ++i)");
  const std::string element = "src[r * " + str(inner) + " + i]";
  w.line(is_max ? "dst[i] = mj_cpu::max_of(dst[i], " + element + ");"
                : "dst[i] += " + element + ";");
  w.close();
  w.close();
  if (op.reduce == ReduceKind::kMean) {
    w.line("for (int64_t i = 0; i < " + str(inner) + "; ++i) dst[i] = dst[i] / " +
           float_literal(double(len)) + ";");
  }
  w.close();
}

void emit_rms_norm(CodeWriter& w, const Shape& x_shape, const std::string& x, double eps,
                   const std::string& out) {
  const int64_t len = x_shape.back();
  w.open("for (int64_t r = 0; r < " + str(element_count(x_shape) / len) + "; ++r)");
  w.line("const float* src = " + x + " + r * " + str(len) + ";");
  w.line("float* dst = " + out + " + r * " + str(len) + ";");
  w.line("float sum_sq = 0.0f;");
  w.line("for (int64_t j = 0; j < " + str(len) + "; ++j) sum_sq += src[j] * src[j];");
  w.line("const float rms = std::sqrt(sum_sq / " + float_literal(double(len)) + " + " +
         float_literal(eps) + ");");
  w.line("for (int64_t j = 0; j < " + str(len) + "; ++j) dst[j] = src[j] / rms;");
  w.close();
}

void emit_concat(CodeWriter& w, const Shape& a_shape, const std::string& a, const Shape& b_shape,
                 const std::string& b, int dim, const std::string& out) {
  int64_t outer = 1, run_a = 1, run_b = 1;
  for (int d = 0; d < dim; ++d) outer *= a_shape[d];
  for (size_t d = dim; d < a_shape.size(); ++d) {
    run_a *= a_shape[d];
    run_b *= b_shape[d];
  }
  w.open("for (int64_t o = 0; o < " + str(outer) + "; ++o)");
  w.line("std::copy(" + a + " + o * " + str(run_a) + ", " + a + " + (o + 1) * " + str(run_a) +
         ", " + out + " + o * " + str(run_a + run_b) + ");");
  w.line("std::copy(" + b + " + o * " + str(run_b) + ", " + b + " + (o + 1) * " + str(run_b) +
         ", " + out + " + o * " + str(run_a + run_b) + " + " + str(run_a) + ");");
  w.close();
}

// The head of a pass that is not elementwise, computed into `out`.
void emit_head(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan, size_t op_index,
               const std::string& out) {
  const Op& op = bg.ops()[op_index];
  auto shape = [&](int i) -> const Shape& { return bg.tensor(op.inputs.at(i)).shape; };
  auto buf = [&](int i) { return buffer_name(plan, op.inputs.at(i)); };
  switch (op.kind) {
    case OpKind::kMatmul: {
      const Shape& c_shape = bg.tensor(op.outputs[0]).shape;
      const int a = op.inputs[0], b = op.inputs[1];
      emit_batched_matmul(
          w, {buf(0), shape(0), plan.row_stride[a], plan.matrix_stride[a]},
          {buf(1), shape(1), plan.row_stride[b], plan.matrix_stride[b]},
          {out, c_shape, c_shape.back(), c_shape[c_shape.size() - 2] * c_shape.back()},
          plan.matmul_adds_into_accum[op_index], plan.next_tile_offset[op.inputs[1]]);
      return;
    }
    case OpKind::kReduce:
      if (!plan.reduce_prologue[op_index].empty()) {
        emit_fused_reduce(w, bg, plan, op, plan.reduce_prologue[op_index], out);
      } else {
        emit_reduce(w, shape(0), buf(0), op, out);
      }
      return;
    case OpKind::kRmsNorm: emit_rms_norm(w, shape(0), buf(0), op.scalar, out); return;
    case OpKind::kConcat: emit_concat(w, shape(0), buf(0), shape(1), buf(1), op.dim, out); return;
    default:
      throw IrError("cpu codegen: no code for block op " + std::string(op_kind_name(op.kind)));
  }
}

// Rows of C up to which the generated product streams B once (prelude.cc, kMaxPanelRows).
constexpr int64_t kStreamedBRows = 8;

}  // namespace

void emit_batched_matmul(CodeWriter& w, const MatmulOperand& a, const MatmulOperand& b,
                         const MatmulOperand& c, bool accumulate, int64_t b_ahead) {
  const int rank = int(c.shape.size());
  const int64_t m = c.shape[rank - 2], n = c.shape[rank - 1], k = a.shape.back();
  // A block over several matrices of B (decode attention's heads) streams one after the
  // other in every loop step, so the next step's tile of the same matrix is a whole round
  // of the others away and its prefetched lines are gone by then; the next matrix's tile is
  // read right after this one. gqa_decode with 8 heads a block ran 1.23x the time of one
  // head a block with the next step's tile prefetched, 1.04x with the next head's
  // (benchmarks/schedule_variants.py). Past kStreamedBRows rows B is packed, not streamed.
  const Shape b_batch = batch_of(b.shape);
  int64_t b_matrices = 1;
  for (int64_t d : b_batch) b_matrices *= d;
  if (b_ahead != 0 && m <= kStreamedBRows && b_matrices > 1 && b_batch == batch_of(c.shape)) {
    b_ahead = b.matrix_stride;
  }
  IndexLoops batches(w, batch_of(c.shape), {batch_of(a.shape), batch_of(b.shape)}, "mb");
  w.line("mj_cpu::matmul<" + str(m) + ", " + str(k) + ", " + str(n) + ", " + str(a.row_stride) +
         ", " + str(b.row_stride) + ", " + str(c.row_stride) + ", " + str(b_ahead) + ", " +
         (accumulate ? "true" : "false") + ">(" + a.buffer + " + (" + batches.operand_offset(0) +
         ") * " + str(a.matrix_stride) + ", " + b.buffer + " + (" + batches.operand_offset(1) +
         ") * " + str(b.matrix_stride) + ", " + c.buffer + " + (" + batches.result_offset() +
         ") * " + str(c.matrix_stride) + ");");
}

void emit_pass(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
               const std::vector<int>& pass) {
  const std::vector<Op>& ops = bg.ops();
  const Op& head = ops[pass.front()];
  const int end_tensor = ops[pass.back()].outputs.at(0);
  const std::string out = buffer_name(plan, end_tensor);
  const Shape& shape = bg.tensor(end_tensor).shape;
  w.open("");
  size_t first_chained = 0;
  if (!is_elementwise(head.kind)) {
    // An accumulator head was already finished into this buffer where it stands.
    if (!is_accumulator(head.kind)) emit_head(w, bg, plan, size_t(pass.front()), out);
    first_chained = 1;
  }
  if (first_chained < pass.size()) {
    const std::vector<int> chain(pass.begin() + first_chained, pass.end());
    const int chained = first_chained == 1 ? head.outputs[0] : -1;
    const ChainOperands operands = chain_operands(bg, plan, chain, chained);
    IndexLoops loops(w, shape, operands.shapes, "e");
    std::vector<std::string> operand_exprs;
    for (size_t i = 0; i < operands.buffers.size(); ++i) {
      operand_exprs.push_back(operands.buffers[i] + "[" + loops.operand_offset(i) + "]");
    }
    w.line(chained >= 0 ? "float v = " + out + "[" + loops.result_offset() + "];" : "float v;");
    emit_chain_values(w, bg, chain, chained, operand_exprs);
    w.line(out + "[" + loops.result_offset() + "] = v;");
  }
  w.close();
}

}  // namespace mj::codegen::cpu
