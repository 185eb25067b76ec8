#include "cc/codegen/cuda/tile_access.h"

#include <climits>

#include "cc/ir/error.h"

namespace mj::codegen::cuda {

using ir::BlockGraph;
using ir::DType;
using ir::IrError;
using ir::Op;
using ir::Shape;

namespace {

const char* block_var(int axis) {
  static const char* const kNames[3] = {"bx", "by", "bz"};
  return kNames[axis];
}

const Op& producer_op(const BlockGraph& bg, int t) { return bg.ops().at(bg.tensor(t).producer); }

}  // namespace

std::string str(int64_t v) { return std::to_string(v); }
std::string tile_name(int t) { return "t" + std::to_string(t); }

const char* element_type(DType d) {
  switch (d) {
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kF16: return "__half";
    default: return "float";
  }
}

std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

std::vector<int64_t> pitched_strides(const Shape& s, int64_t pitch) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) {
    st[d] = d == int(s.size()) - 2 ? pitch : st[d + 1] * s[d + 1];
  }
  return st;
}

std::string linear_index(const std::vector<std::string>& idx, const std::vector<int64_t>& strides,
                         const Shape& shape, bool wide) {
  std::string out;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (shape[d] == 1 || idx[d] == "0") continue;
    if (!out.empty()) out += " + ";
    const std::string term = wide ? "int64_t(" + idx[d] + ")" : "(" + idx[d] + ")";
    out += strides[d] == 1 ? term : term + " * " + str(strides[d]);
  }
  return out.empty() ? "0" : out;
}

namespace {

std::string shared_offset(const Emit& e, int t, const std::vector<std::string>& idx) {
  const Shape& shape = e.bg.tensor(t).shape;
  return linear_index(idx, pitched_strides(shape, e.plan.tiles.at(t).pitch), shape);
}

}  // namespace

std::string store_element(const Emit& e, int t, const std::vector<std::string>& idx,
                          const std::string& value) {
  const TilePlan& tile = e.plan.tiles.at(t);
  const std::string at = tile_name(t) + "[" + shared_offset(e, t, idx) + "]";
  if (tile.element == DType::kF32) return at + " = " + value + ";";
  return at + " = mj_cuda::from_f32<" + element_type(tile.element) + ">(" + value + ");";
}

std::string element_address(const Emit& e, int t, const std::vector<std::string>& idx) {
  return tile_name(t) + " + " + shared_offset(e, t, idx);
}

std::string read_element(const Emit& e, int t, const std::vector<std::string>& idx) {
  const Shape& shape = e.bg.tensor(t).shape;
  const TilePlan& tile = e.plan.tiles.at(t);
  switch (tile.storage) {
    case Storage::kShared:
      return "mj_cuda::to_f32(" + tile_name(t) + "[" +
             linear_index(idx, pitched_strides(shape, tile.pitch), shape) + "])";
    case Storage::kGlobal: {
      const Op& input = producer_op(e.bg, t);
      const Shape& whole = e.bg.kernel_input_shape(input.io_index);
      return "mj_cuda::to_f32(" + tile_name(t) + "[" +
             linear_index(idx, dense_strides(whole), shape, needs_wide_index(whole)) + "])";
    }
    case Storage::kView: {
      const Op& concat = producer_op(e.bg, t);
      const int a = concat.inputs.at(0), b = concat.inputs.at(1);
      const int64_t split = e.bg.tensor(a).shape.at(concat.dim);
      std::vector<std::string> in_b = idx;
      in_b[concat.dim] = "(" + idx[concat.dim] + ") - " + str(split);
      return "((" + idx[concat.dim] + ") < " + str(split) + " ? " + read_element(e, a, idx) +
             " : " + read_element(e, b, in_b) + ")";
    }
    default:
      throw IrError("cuda codegen: t" + std::to_string(t) +
                    " lives only inside a fused pass but is read outside it");
  }
}

std::vector<std::string> broadcast_index(const Shape& operand,
                                         const std::vector<std::string>& result_idx) {
  const size_t lead = result_idx.size() - operand.size();
  std::vector<std::string> idx;
  for (size_t d = 0; d < operand.size(); ++d) {
    idx.push_back(operand[d] == 1 ? "0" : result_idx[lead + d]);
  }
  return idx;
}

std::vector<std::string> open_thread_loop(const Emit& e, const Shape& shape, const std::string& var,
                                          const std::string& flat) {
  const int64_t n = element_count(shape);
  const char* type = n > int64_t(INT_MAX) - e.plan.threads ? "int64_t" : "int";
  e.w.open(std::string("for (") + type + " " + flat + " = threadIdx.x; " + flat + " < " + str(n) +
           "; " + flat + " += " + str(e.plan.threads) + ")");
  const std::vector<int64_t> strides = dense_strides(shape);
  std::vector<std::string> idx;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      idx.push_back("0");
      continue;
    }
    const std::string v = var + std::to_string(d);
    std::string value = flat;
    if (strides[d] != 1) value = "(" + value + " / " + str(strides[d]) + ")";
    if (d > 0) value += " % " + str(shape[d]);
    e.w.line(std::string("[[maybe_unused]] const ") + type + " " + v + " = " + value + ";");
    idx.push_back(v);
  }
  return idx;
}

std::string input_origin(const BlockGraph& bg, const Op& input, const std::string& iteration) {
  const Shape& tile = bg.tensor(input.outputs.at(0)).shape;
  const Shape& whole = bg.kernel_input_shape(input.io_index);
  const std::vector<int64_t> strides = dense_strides(whole);
  std::string out;
  auto term = [&](const std::string& var, int64_t coef) {
    if (coef == 0 || var == "0") return;
    out += (out.empty() ? "" : " + ") + std::string("int64_t(") + var + ") * " + str(coef);
  };
  for (int a = 0; a < 3; ++a) {
    const int d = input.imap[a];
    if (bg.grid()[a] > 1 && d >= 0) term(block_var(a), whole[d] / bg.grid()[a] * strides[d]);
  }
  if (input.fmap >= 0) term(iteration, tile[input.fmap] * strides[input.fmap]);
  return out.empty() ? "0" : out;
}

void declare_tile_pointer(const Emit& e, int t, const std::string& stage,
                          const std::string& iteration) {
  const TilePlan& tile = e.plan.tiles.at(t);
  const std::string type = element_type(tile.element);
  if (tile.storage == Storage::kShared) {
    std::string at = str(tile.offset);
    if (tile.stages > 1) at += " + (" + stage + ") * " + str(tile.bytes);
    e.w.line("[[maybe_unused]] " + type + "* const " + tile_name(t) + " = reinterpret_cast<" +
             type + "*>(smem + " + at + ");");
  } else if (tile.storage == Storage::kGlobal) {
    const Op& input = producer_op(e.bg, t);
    e.w.line("[[maybe_unused]] const " + type + "* const " + tile_name(t) + " = io.in" +
             str(input.io_index) + " + " + input_origin(e.bg, input, iteration) + ";");
  }
}

}  // namespace mj::codegen::cuda
