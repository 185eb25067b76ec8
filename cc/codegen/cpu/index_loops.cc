#include "cc/codegen/cpu/index_loops.h"

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
                       const std::string& var)
    : w_(w) {
  const int64_t total = element_count(result);
  bool all_equal = true;
  for (const Shape& s : operands) all_equal &= element_count(s) == total;
  if (result.empty() || total == 1) {
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
  const int rank = int(result.size());
  std::vector<std::vector<std::pair<std::string, int64_t>>> terms(operands.size());
  std::vector<std::pair<std::string, int64_t>> result_terms;
  int64_t result_stride = total;
  for (int d = 0; d < rank; ++d) {
    const std::string v = var + std::to_string(d);
    result_stride /= result[d];
    if (result[d] == 1) continue;
    w_.open("for (int64_t " + v + " = 0; " + v + " < " + std::to_string(result[d]) + "; ++" + v +
            ")");
    ++depth_;
    result_terms.emplace_back(v, result_stride);
    for (size_t i = 0; i < operands.size(); ++i) {
      const Shape& s = operands[i];
      const int lead = rank - int(s.size());
      if (d < lead || s[d - lead] == 1) continue;
      int64_t stride = 1;
      for (int e = d - lead + 1; e < int(s.size()); ++e) stride *= s[e];
      terms[i].emplace_back(v, stride);
    }
  }
  result_offset_ = linear_expr(result_terms);
  for (const auto& t : terms) operand_offsets_.push_back(linear_expr(t));
}

IndexLoops::~IndexLoops() {
  for (int i = 0; i < depth_; ++i) w_.close();
}

}  // namespace mj::codegen::cpu
