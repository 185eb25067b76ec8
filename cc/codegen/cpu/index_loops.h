#pragma once
// Nested loops over a result shape with numpy-broadcast operands: opens the loops and gives
// each operand's flat offset as an expression of the loop variables (a stretched dim
// contributes nothing). Equal shapes collapse to one flat loop, which GCC vectorizes best.
#include <string>
#include <vector>

#include "cc/codegen/common/code_writer.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cpu {

class IndexLoops {
 public:
  // `var` prefixes the loop variables ("i" gives i0, i1, ...); distinct for nested uses.
  // `left`: dims of `result` whose loops the caller writes inside these (in any order it
  // likes); they get no loop here, and left_strides gives each tensor's stride along them.
  IndexLoops(common::CodeWriter& w, const ir::Shape& result, const std::vector<ir::Shape>& operands,
             const std::string& var, const std::vector<int>& left = {});
  ~IndexLoops();
  IndexLoops(const IndexLoops&) = delete;
  IndexLoops& operator=(const IndexLoops&) = delete;

  const std::string& result_offset() const { return result_offset_; }
  const std::string& operand_offset(size_t i) const { return operand_offsets_.at(i); }
  // Along left dim k (as given): the result's stride, then each operand's (0 where it is
  // broadcast).
  const std::vector<int64_t>& left_strides(size_t k) const { return left_strides_.at(k); }

 private:
  common::CodeWriter& w_;
  int depth_ = 0;
  std::string result_offset_;
  std::vector<std::string> operand_offsets_;
  std::vector<std::vector<int64_t>> left_strides_;
};

// "a*c0 + b*c1 ..." from (variable, coefficient) terms, skipping zeros; "0" when empty.
std::string linear_expr(const std::vector<std::pair<std::string, int64_t>>& terms);

}  // namespace mj::codegen::cpu
