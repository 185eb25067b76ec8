#include "cc/verify/signature_check.h"

namespace mj::verify {

using ir::dtype_name;
using ir::KernelGraph;
using ir::Shape;
using ir::shape_str;
using ir::Tensor;

std::string signature_mismatch(const KernelGraph& a, const KernelGraph& b) {
  const auto& ia = a.input_ids();
  const auto& ib = b.input_ids();
  if (ia.size() != ib.size()) {
    return "input count differs: graph a has " + std::to_string(ia.size()) + " inputs, graph b " +
           std::to_string(ib.size());
  }
  for (size_t i = 0; i < ia.size(); ++i) {
    const Tensor& ta = a.tensor(ia[i]);
    const Tensor& tb = b.tensor(ib[i]);
    if (ta.shape != tb.shape) {
      return "input " + std::to_string(i) + " shape differs: graph a " + shape_str(ta.shape) +
             ", graph b " + shape_str(tb.shape);
    }
    if (ta.dtype != tb.dtype) {
      return "input " + std::to_string(i) + " dtype differs: graph a " + dtype_name(ta.dtype) +
             ", graph b " + dtype_name(tb.dtype);
    }
  }
  const auto& oa = a.output_ids();
  const auto& ob = b.output_ids();
  if (oa.size() != ob.size()) {
    return "output count differs: graph a has " + std::to_string(oa.size()) + " outputs, graph b " +
           std::to_string(ob.size());
  }
  for (size_t i = 0; i < oa.size(); ++i) {
    const Shape& sa = a.tensor(oa[i]).shape;
    const Shape& sb = b.tensor(ob[i]).shape;
    if (sa != sb) {
      return "output " + std::to_string(i) + " shape differs: graph a " + shape_str(sa) +
             ", graph b " + shape_str(sb);
    }
  }
  return "";
}

}  // namespace mj::verify
