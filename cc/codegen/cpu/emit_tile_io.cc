#include "cc/codegen/cpu/emit_tile_io.h"

#include <utility>
#include <vector>

#include "cc/codegen/cpu/index_loops.h"

namespace mj::codegen::cpu {

using common::CodeWriter;
using ir::BlockGraph;
using ir::DType;
using ir::Op;
using ir::Shape;

namespace {

const char* block_var(int axis) {
  static const char* const kNames[3] = {"bx", "by", "bz"};
  return kNames[axis];
}

std::vector<int64_t> dense_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int d = int(s.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
  return st;
}

const char* load_conversion(DType d) {
  switch (d) {
    case DType::kBF16: return "mj_cpu::from_bf16";
    case DType::kF16: return "mj_cpu::from_f16";
    default: return "mj_cpu::from_f32";
  }
}

const char* store_conversion(DType d) {
  switch (d) {
    case DType::kBF16: return "mj_cpu::to_bf16";
    case DType::kF16: return "mj_cpu::to_f16";
    default: return "mj_cpu::to_f32";
  }
}

// Copies a box of shape `box`: element (i_0, ..., i_last) goes from
// src[sum i_d * src_strides[d]] to dst[sum i_d * dst_strides[d]], through `convert`. The
// last dim is the contiguous inner loop on both sides. With a `prefetch` (the code of a
// condition, and an offset in elements), each run also asks for the lines `ahead` elements
// further on while the condition holds: the next iteration's tile, whose runs start a page
// or more apart, where no hardware prefetcher follows.
struct CopyPrefetch {
  std::string condition;
  int64_t ahead = 0;
};

void emit_box_copy(CodeWriter& w, const Shape& box, const std::string& src,
                   const std::vector<int64_t>& src_strides, const std::string& dst,
                   const std::vector<int64_t>& dst_strides, const std::string& convert,
                   const CopyPrefetch& prefetch = {}) {
  const int rank = int(box.size());
  std::vector<std::pair<std::string, int64_t>> src_terms, dst_terms;
  int opened = 0;
  for (int d = 0; d + 1 < rank; ++d) {
    if (box[d] == 1) continue;
    const std::string v = "r" + std::to_string(d);
    w.open("for (int64_t " + v + " = 0; " + v + " < " + std::to_string(box[d]) + "; ++" + v + ")");
    ++opened;
    src_terms.emplace_back(v, src_strides[d]);
    dst_terms.emplace_back(v, dst_strides[d]);
  }
  w.line("const auto* from = " + src + " + " + linear_expr(src_terms) + ";");
  w.line("auto* to = " + dst + " + " + linear_expr(dst_terms) + ";");
  if (prefetch.ahead != 0) {
    w.open("if (" + prefetch.condition + ")");
    w.open("for (int64_t j = 0; j < " + std::to_string(box.back()) +
           "; j += 64 / int64_t(sizeof(*from)))");
    w.line("__builtin_prefetch(from + " + std::to_string(prefetch.ahead) + " + j, 0, 2);");
    w.close();
    w.close();
  }
  w.open("for (int64_t j = 0; j < " + std::to_string(box.back()) + "; ++j)");
  w.line("to[j] = " + convert + "(from[j]);");
  w.close();
  for (int i = 0; i < opened; ++i) w.close();
}

}  // namespace

const char* storage_type(DType d) { return d == DType::kF32 ? "float" : "uint16_t"; }

const char* in_place_type(const BlockGraph& bg, int t) {
  const int io = bg.ops()[bg.tensor(t).producer].io_index;
  return bg.kernel_input_dtype(io) == DType::kBF16 ? "mj_cpu::Bf16" : "float";
}

void emit_input_load(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan, const Op& input) {
  const int t = input.outputs.at(0);
  const Shape& tile = bg.tensor(t).shape;
  const Shape& whole = bg.kernel_input_shape(input.io_index);
  const std::vector<int64_t> strides = dense_strides(whole);
  std::vector<std::pair<std::string, int64_t>> origin;
  for (int a = 0; a < 3; ++a) {
    const int d = input.imap[a];
    if (bg.grid()[a] > 1 && d >= 0) {
      origin.emplace_back(block_var(a), whole[d] / bg.grid()[a] * strides[d]);
    }
  }
  if (input.fmap >= 0) origin.emplace_back("it", tile[input.fmap] * strides[input.fmap]);
  const std::string base = "io.in" + std::to_string(input.io_index) + " + " + linear_expr(origin);
  const std::string name = "t" + std::to_string(t);
  if (plan.read_in_place.at(t)) {
    const std::string type = in_place_type(bg, t);
    if (type == "float") {
      w.line(name + " = " + base + ";");
    } else {  // the storage's uint16_t, seen as what it holds
      w.line(name + " = reinterpret_cast<const " + type + "*>(io.in" +
             std::to_string(input.io_index) + ") + " + linear_expr(origin) + ";");
    }
    return;
  }
  w.open("");
  w.line("const auto* tile_origin = " + base + ";");
  const CopyPrefetch prefetch{"it + 1 < " + std::to_string(bg.forloop_range()),
                              plan.next_copy_offset.at(t)};
  emit_box_copy(w, tile, "tile_origin", strides, name, dense_strides(tile),
                load_conversion(bg.kernel_input_dtype(input.io_index)), prefetch);
  w.close();
}

void emit_output_store(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
                       const Op& output) {
  const int t = output.inputs.at(0);
  const Shape& tile = bg.tensor(t).shape;
  const Shape& whole = bg.kernel_output_shape(output.io_index);
  const std::vector<int64_t> strides = dense_strides(whole);
  std::vector<std::pair<std::string, int64_t>> origin;
  for (int a = 0; a < 3; ++a) {
    const int d = output.omap[a];
    if (bg.grid()[a] > 1 && d >= 0) origin.emplace_back(block_var(a), tile[d] * strides[d]);
  }
  w.open("");
  w.line("auto* tile_origin = io.out" + std::to_string(output.io_index) + " + " +
         linear_expr(origin) + ";");
  emit_box_copy(w, tile, buffer_name(plan, t), dense_strides(tile), "tile_origin", strides,
                store_conversion(bg.kernel_output_dtype(output.io_index)));
  w.close();
}

}  // namespace mj::codegen::cpu
