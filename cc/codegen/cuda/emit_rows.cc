#include "cc/codegen/cuda/emit_rows.h"

#include "cc/codegen/cuda/emit_elementwise.h"
#include "cc/codegen/cuda/emit_matmul.h"

namespace mj::codegen::cuda {

using ir::DType;
using ir::is_accumulator;
using ir::Op;
using ir::OpKind;
using ir::ReduceKind;
using ir::Shape;

namespace {

const std::string kSync = "__syncthreads();";

std::string smem_floats(int64_t offset) {
  return "reinterpret_cast<float*>(smem + " + str(offset) + ")";
}

// Declares the multi-index of `row` (all dims but the last of `shape`) and returns it with
// "j" appended for the element along the row.
std::vector<std::string> declare_row_index(const Emit& e, const Shape& shape) {
  const Shape rows_shape(shape.begin(), shape.end() - 1);
  const std::vector<int64_t> strides = dense_strides(rows_shape);
  std::vector<std::string> idx;
  for (size_t d = 0; d < rows_shape.size(); ++d) {
    if (rows_shape[d] == 1) {
      idx.push_back("0");
      continue;
    }
    const std::string v = "r" + std::to_string(d);
    e.w.line("[[maybe_unused]] const int " + v + " = row / " + str(strides[d]) + " % " +
             str(rows_shape[d]) + ";");
    idx.push_back(v);
  }
  idx.push_back("j");
  return idx;
}

int64_t row_count(const Shape& shape) { return element_count(shape) / shape.back(); }

// Opens a loop giving each row (all dims but the last) of `shape` to one warp; declares the
// row's index r0, r1, ... and returns them with "j" appended for the element along the row.
// The caller opens the lane loop over j and closes this loop.
std::vector<std::string> open_warp_rows(const Emit& e, const Shape& shape) {
  e.w.open("for (int row = threadIdx.x >> 5; row < " + str(row_count(shape)) +
           "; row += " + str(e.plan.threads / 32) + ")");
  e.w.line("[[maybe_unused]] const int lane = threadIdx.x & 31;");
  return declare_row_index(e, shape);
}

// The same rows dealt statically, the w-th row of warp v being v + w * warps, so state kept
// in registers indexed by w stays with its row. Returns the number of blocks opened.
int open_static_warp_rows(const Emit& e, const SoftmaxGroup& g, const Shape& shape) {
  const int64_t rows = row_count(shape), warps = e.plan.threads / 32;
  e.w.line("#pragma unroll");
  e.w.open("for (int w = 0; w < " + str(g.rows_per_warp) + "; ++w)");
  e.w.line("const int row = (threadIdx.x >> 5) + w * " + str(warps) + ";");
  e.w.line("[[maybe_unused]] const int lane = threadIdx.x & 31;");
  if (rows % warps == 0) return 1;
  e.w.open("if (row < " + str(rows) + ")");
  return 2;
}

std::string lane_loop(int64_t len) { return "for (int j = lane; j < " + str(len) + "; j += 32)"; }

bool is_softmax(OpKind k) {
  return k == OpKind::kAccumMaxLast || k == OpKind::kAccumExpSumLast ||
         k == OpKind::kAccumExpMatmul;
}

std::string group_name(const Emit& e, const SoftmaxGroup& g) {
  for (size_t i = 0; i < e.plan.softmax_groups.size(); ++i) {
    if (&e.plan.softmax_groups[i] == &g) return std::to_string(i);
  }
  return "0";
}

// Where a group's running max and op `o`'s exp-sum live: registers indexed by the static
// row slot w, or shared memory indexed by the row.
std::string running_max(const Emit& e, const SoftmaxGroup& g) {
  return g.registers ? "smax" + group_name(e, g) + "[w]" : smem_floats(g.max_offset) + "[row]";
}
std::string running_sum(const Emit& e, const SoftmaxGroup& g, int o) {
  return g.registers ? "ssum" + std::to_string(o) + "[w]"
                     : tile_name(e.bg.ops()[o].outputs.at(0)) + "[row]";
}

std::string probs_type(const SoftmaxGroup& g) { return element_type(g.probs); }

void emit_row_sum_update(const Emit& e, const Op& acc) {
  const int x = acc.inputs.at(0);
  const Shape& shape = e.bg.tensor(x).shape;
  e.w.open("");
  const std::vector<std::string> idx = open_warp_rows(e, shape);
  e.w.line("float s = 0.0f;");
  e.w.open(lane_loop(shape.back()));
  e.w.line("const float x = " + read_element(e, x, idx) + ";");
  e.w.line(acc.kind == OpKind::kAccumRmsLast ? "s = fmaf(x, x, s);" : "s += x;");
  e.w.close();
  e.w.line("s = mj_cuda::warp_sum(s);");
  e.w.line("if (lane == 0) " + tile_name(acc.outputs.at(0)) + "[row] += s;");
  e.w.close();
  e.w.close();
}

// One warp per row of s: the new running max, exp(s - max) into the probs tile, and in the
// same pass the row's sum of them into every exp-sum (rescaled first); the rescale factor
// goes to shared memory for the products. Then the products, rescaled and accumulated.
void emit_softmax_update(const Emit& e, const SoftmaxGroup& g) {
  const Shape& s_shape = e.bg.tensor(g.s).shape;
  const int64_t len = s_shape.back();
  const std::string scale = smem_floats(g.scale_offset);
  const std::string probs =
      "reinterpret_cast<" + probs_type(g) + "*>(smem + " + str(g.probs_offset) + ")";
  bool has_products = false;
  for (int o : g.accum_ops) has_products |= e.bg.ops()[o].kind == OpKind::kAccumExpMatmul;
  e.w.open("");
  int opened = 1;
  std::vector<std::string> idx;
  if (g.registers) {
    opened = open_static_warp_rows(e, g, s_shape);
    idx = declare_row_index(e, s_shape);
  } else {
    idx = open_warp_rows(e, s_shape);
  }
  e.w.line("const float old = " + running_max(e, g) + ";");
  e.w.line("float mx = old;");
  e.w.line(lane_loop(len) + " mx = mj_cuda::max_of(mx, " + read_element(e, g.s, idx) + ");");
  e.w.line("mx = mj_cuda::warp_max(mx);");
  // A row with no finite score yet holds no mass: keep it at zero instead of exp(nan). A NaN
  // score makes the max NaN (max_of propagates it), and with it every exp and sum.
  e.w.line("const bool empty = mx == -INFINITY;");
  e.w.line("float sum = 0.0f;");
  e.w.open(lane_loop(len));
  e.w.line("const float p = empty ? 0.0f : expf(" + read_element(e, g.s, idx) + " - mx);");
  if (has_products) {
    const std::string at = probs + "[row * " + str(g.probs_pitch) + " + j]";
    e.w.line(g.probs == DType::kF32 ? at + " = p;"
                                    : at + " = mj_cuda::from_f32<" + probs_type(g) + ">(p);");
  }
  e.w.line("sum += p;");
  e.w.close();
  e.w.line("sum = mj_cuda::warp_sum(sum);");
  e.w.line("const float factor = empty ? 1.0f : expf(old - mx);");
  for (int o : g.accum_ops) {
    if (e.bg.ops()[o].kind != OpKind::kAccumExpSumLast) continue;
    const std::string acc = running_sum(e, g, o);
    e.w.line(g.registers ? acc + " = " + acc + " * factor + sum;"
                         : "if (lane == 0) " + acc + " = " + acc + " * factor + sum;");
  }
  if (has_products) e.w.line("if (lane == 0) " + scale + "[row] = factor;");
  e.w.line(g.registers ? running_max(e, g) + " = mx;"
                       : "if (lane == 0) " + running_max(e, g) + " = mx;");
  for (int i = 0; i < opened; ++i) e.w.close();
  e.w.close();
  if (!has_products) {
    // Each row's state belongs to the warp that updated it: nothing for other warps to see.
    if (!g.registers) e.w.line(kSync);
    return;
  }
  e.w.line(kSync);
  const Shape s_rows(s_shape.begin(), s_shape.end() - 1);
  for (int o : g.accum_ops) {
    const Op& acc = e.bg.ops()[o];
    if (acc.kind != OpKind::kAccumExpMatmul) continue;
    const int out = acc.outputs.at(0);
    const Shape& c_shape = e.bg.tensor(out).shape;
    MatmulCall call;
    call.op = o;
    call.c = out;
    call.accumulate = true;
    if (e.plan.matmuls[o].registers) {
      call.row_scale = scale;
      call.row_scale_shape = s_rows;
    } else {
      // Rescale each row of the running product by its row's factor; s's batch dims
      // broadcast onto the product's like the matmul's do.
      e.w.open("");
      std::vector<std::string> c_idx = open_thread_loop(e, c_shape, "c", "flat");
      std::vector<std::string> rows(c_idx.begin(), c_idx.end() - 1);
      const std::vector<std::string> s_row = broadcast_index(s_rows, rows);
      e.w.line(tile_name(out) + "[flat] *= " + scale + "[" +
               linear_index(s_row, dense_strides(s_rows), s_rows) + "];");
      e.w.close();
      e.w.close();
      e.w.line(kSync);
    }
    const std::string p = "probs" + std::to_string(o);
    e.w.open("");
    e.w.line("const " + probs_type(g) + "* const " + p + " = " + probs + ";");
    const std::vector<int64_t> probs_strides = pitched_strides(s_shape, g.probs_pitch);
    MatmulOperand a{s_shape, e.bg.tensor(g.s).dtype,
                    [s_shape, p, probs_strides](const std::vector<std::string>& i) {
                      return "mj_cuda::to_f32(" + p + "[" +
                             linear_index(i, probs_strides, s_shape) + "])";
                    },
                    nullptr};
    if (e.plan.matmuls[o].ldmatrix_a) {
      a.address = [s_shape, p, probs_strides](const std::vector<std::string>& i) {
        return p + " + " + linear_index(i, probs_strides, s_shape);
      };
    }
    emit_matmul(e, a, tensor_operand(e, acc.inputs.at(1), o, /*as_a=*/false), call);
    e.w.close();
    e.w.line(kSync);
  }
}

}  // namespace

void emit_reduce(const Emit& e, const Op& op) {
  const int x = op.inputs.at(0), out = op.outputs.at(0);
  const Shape& x_shape = e.bg.tensor(x).shape;
  const int64_t len = x_shape[op.dim];
  const bool is_max = op.reduce == ReduceKind::kMax;
  e.w.open("");
  const std::vector<std::string> at = open_thread_loop(e, e.bg.tensor(out).shape, "i", "flat");
  std::vector<std::string> idx = at;
  idx[op.dim] = "red";
  e.w.line(std::string("float r = ") + (is_max ? "-INFINITY" : "0.0f") + ";");
  e.w.open("for (int red = 0; red < " + str(len) + "; ++red)");
  const std::string element = read_element(e, x, idx);
  e.w.line(is_max ? "r = mj_cuda::max_of(r, " + element + ");" : "r += " + element + ";");
  e.w.close();
  if (op.reduce == ReduceKind::kMean) e.w.line("r = r / " + float_literal(double(len)) + ";");
  e.w.line(store_element(e, out, at, "r"));
  e.w.close();
  e.w.close();
}

void emit_rms_norm(const Emit& e, const Op& op) {
  const int x = op.inputs.at(0);
  const Shape& shape = e.bg.tensor(x).shape;
  const int64_t len = shape.back();
  e.w.open("");
  const std::vector<std::string> idx = open_warp_rows(e, shape);
  e.w.line("float ss = 0.0f;");
  e.w.open(lane_loop(len));
  e.w.line("const float x = " + read_element(e, x, idx) + ";");
  e.w.line("ss = fmaf(x, x, ss);");
  e.w.close();
  e.w.line("ss = mj_cuda::warp_sum(ss);");
  e.w.line("const float rms = sqrtf(ss / " + float_literal(double(len)) + " + " +
           float_literal(op.scalar) + ");");
  e.w.line(lane_loop(len) + " " +
           store_element(e, op.outputs.at(0), idx, read_element(e, x, idx) + " / rms"));
  e.w.close();
  e.w.close();
}

void emit_accumulators_init(const Emit& e) {
  for (const Op& op : e.bg.ops()) {
    if (!is_accumulator(op.kind) || op.kind == OpKind::kAccumMaxLast) continue;
    const int t = op.outputs.at(0);
    e.w.line("for (int i = threadIdx.x; i < " + str(element_count(e.bg.tensor(t).shape)) +
             "; i += " + str(e.plan.threads) + ") " + tile_name(t) + "[i] = 0.0f;");
  }
  for (const SoftmaxGroup& g : e.plan.softmax_groups) {
    const Shape& s = e.bg.tensor(g.s).shape;
    if (g.registers) {
      const std::string rows = "[" + str(g.rows_per_warp) + "]";
      e.w.line("float smax" + group_name(e, g) + rows + ";");
      e.w.line("#pragma unroll");
      e.w.line("for (int w = 0; w < " + str(g.rows_per_warp) + "; ++w) smax" + group_name(e, g) +
               "[w] = -INFINITY;");
      for (int o : g.accum_ops) {
        if (e.bg.ops()[o].kind == OpKind::kAccumExpSumLast) {
          e.w.line("float ssum" + std::to_string(o) + rows + " = {};");
        }
      }
      continue;
    }
    e.w.line("for (int i = threadIdx.x; i < " + str(row_count(s)) + "; i += " +
             str(e.plan.threads) + ") " + smem_floats(g.max_offset) + "[i] = -INFINITY;");
  }
}

void emit_softmax_state_spill(const Emit& e) {
  for (const SoftmaxGroup& g : e.plan.softmax_groups) {
    if (!g.registers) continue;
    const Shape& s_shape = e.bg.tensor(g.s).shape;
    e.w.open("");
    const int opened = open_static_warp_rows(e, g, s_shape);
    e.w.open("if (lane == 0)");
    for (int o : g.accum_ops) {
      const Op& op = e.bg.ops()[o];
      const std::string out = tile_name(op.outputs.at(0)) + "[row]";
      if (op.kind == OpKind::kAccumMaxLast) e.w.line(out + " = " + running_max(e, g) + ";");
      if (op.kind == OpKind::kAccumExpSumLast) e.w.line(out + " = " + running_sum(e, g, o) + ";");
    }
    e.w.close();
    for (int i = 0; i < opened; ++i) e.w.close();
    e.w.close();
  }
}

void emit_accumulators_update(const Emit& e) {
  bool emitted = false;
  for (const Op& op : e.bg.ops()) {
    if (op.kind == OpKind::kAccumSum) {
      const int x = op.inputs.at(0);
      const int producer = e.bg.tensor(x).producer;
      if (e.plan.matmul_adds_into[producer] >= 0) continue;  // the matmul added it already
      e.w.open("");
      const std::vector<std::string> idx = open_thread_loop(e, e.bg.tensor(x).shape, "i", "flat");
      e.w.line(tile_name(op.outputs.at(0)) + "[flat] += " + read_element(e, x, idx) + ";");
      e.w.close();
      e.w.close();
      emitted = true;
    } else if (is_accumulator(op.kind) && !is_softmax(op.kind)) {
      emit_row_sum_update(e, op);
      emitted = true;
    }
  }
  // The body ended with a barrier; another is needed only after updates made here.
  if (emitted) e.w.line(kSync);
  for (const SoftmaxGroup& g : e.plan.softmax_groups) emit_softmax_update(e, g);
}

bool emit_accumulator_finish(const Emit& e, size_t op_index) {
  const Op& op = e.bg.ops()[op_index];
  const int t = op.outputs.at(0);
  const std::string out = tile_name(t);
  const int64_t rows = element_count(e.bg.tensor(t).shape);
  const std::string loop =
      "for (int r = threadIdx.x; r < " + str(rows) + "; r += " + str(e.plan.threads) + ") ";
  if (op.kind == OpKind::kAccumMeanLast || op.kind == OpKind::kAccumRmsLast) {
    const int64_t count = int64_t(e.bg.forloop_range()) * e.bg.tensor(op.inputs[0]).shape.back();
    const std::string mean = out + "[r] / " + float_literal(double(count));
    e.w.line(loop + out + "[r] = " +
             (op.kind == OpKind::kAccumMeanLast
                  ? mean
                  : "sqrtf(" + mean + " + " + float_literal(op.scalar) + ")") +
             ";");
    return true;
  }
  if (op.kind == OpKind::kAccumMaxLast) {
    const SoftmaxGroup& g = e.plan.softmax_groups.at(e.plan.softmax_group_of.at(op_index));
    if (g.registers) return false;  // emit_softmax_state_spill wrote it
    e.w.line(loop + out + "[r] = " + smem_floats(g.max_offset) + "[r];");
    return true;
  }
  return false;
}

}  // namespace mj::codegen::cuda
