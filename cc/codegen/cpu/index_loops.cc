#include "cc/codegen/cpu/index_loops.h"

#include <algorithm>

#include "cc/codegen/cpu/kernel_plan.h"

namespace mj::codegen::cpu {

using common::CodeWriter;
using ir::Shape;

std::string linear_expr(const std::vector<std::pair<std::string, int64_t>>& terms) {
  std::string out;
  for (const auto& [var, coef] : terms) {
    if (coef == 0) continue;
    if (!out.empty()) out += " + ";
    out += coef == 1 ? var : var + " * " + std::to_string(coef);
  }
  return out.empty() ? "0" : out;
}

IndexLoops::IndexLoops(CodeWriter& w, const Shape& result, const std::vector<Shape>& operands,
                       const std::string& var, const std::vector<int>& left)
    : w_(w) {
  const int64_t total = element_count(result);
  bool all_equal = left.empty();
  for (const Shape& s : operands) all_equal &= element_count(s) == total;
  if (left.empty() && (result.empty() || total == 1)) {
    result_offset_ = "0";
    operand_offsets_.assign(operands.size(), "0");
    return;
  }
  if (all_equal) {
    // Broadcasting only stretches size-1 dims, so equal element counts mean equal layouts.
    const std::string v = var + "0";
    w_.open("for (int64_t " + v + " = 0; " + v + " < " + std::to_string(total) + "; ++" + v + ")");
    depth_ = 1;
    result_offset_ = v;
    operand_offsets_.assign(operands.size(), v);
    return;
  }
  // Each dim of size > 1 with its stride in the result and in every operand (0 where the
  // operand is broadcast along it). Neighbouring dims that every tensor holds contiguously
  // merge into one loop: a pass over [256, 4, 4] with a mask broadcast along the last two
  // runs 256 loops of 16, which vectorize, instead of loops of 4, which did not.
  struct Dim {
    int64_t size;
    std::vector<int64_t> strides;  // result first, then the operands
  };
  const int rank = int(result.size());
  std::vector<Dim> dims;
  left_strides_.assign(left.size(), {});
  int64_t result_stride = total;
  for (int d = 0; d < rank; ++d) {
    result_stride /= result[d];
    Dim dim{result[d], {result[d] == 1 ? 0 : result_stride}};
    for (const Shape& s : operands) {
      const int lead = rank - int(s.size());
      int64_t stride = 0;
      if (d >= lead && s[d - lead] != 1) {
        stride = 1;
        for (int e = d - lead + 1; e < int(s.size()); ++e) stride *= s[e];
      }
      dim.strides.push_back(stride);
    }
    const auto at = std::find(left.begin(), left.end(), d);
    if (at != left.end()) {
      left_strides_[at - left.begin()] = dim.strides;
      continue;
    }
    if (result[d] == 1) continue;
    if (!dims.empty()) {
      Dim& outer = dims.back();
      bool contiguous = true;
      for (size_t i = 0; i < dim.strides.size(); ++i) {
        contiguous &= outer.strides[i] == dim.strides[i] * dim.size;
      }
      if (contiguous) {
        outer.size *= dim.size;
        outer.strides = dim.strides;
        continue;
      }
    }
    dims.push_back(dim);
  }
  std::vector<std::vector<std::pair<std::string, int64_t>>> terms(operands.size() + 1);
  for (size_t d = 0; d < dims.size(); ++d) {
    const std::string v = var + std::to_string(d);
    w_.open("for (int64_t " + v + " = 0; " + v + " < " + std::to_string(dims[d].size) + "; ++" + v +
            ")");
    ++depth_;
    for (size_t i = 0; i < terms.size(); ++i) terms[i].emplace_back(v, dims[d].strides[i]);
  }
  result_offset_ = linear_expr(terms[0]);
  for (size_t i = 1; i < terms.size(); ++i) operand_offsets_.push_back(linear_expr(terms[i]));
}

IndexLoops::~IndexLoops() {
  for (int i = 0; i < depth_; ++i) w_.close();
}

}  // namespace mj::codegen::cpu
