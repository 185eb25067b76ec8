#include "cc/codegen/cuda/emit_elementwise.h"

#include "cc/codegen/common/scalar_exprs.h"
#include "cc/ir/error.h"

namespace mj::codegen::cuda {

using ir::is_elementwise;
using ir::is_unary_elementwise;
using ir::Op;
using ir::OpKind;

namespace {

// The functions of prelude.cc: CUDA's own exp, sqrt, erf and erfc (IEEE sqrt, the others
// within a few ulp; NaN in NaN out and the limits at ±inf, as lax.erf and lax.erfc).
constexpr common::ScalarFunctions kCuda{
    "cuda codegen",       "expf",          "mj_cuda::square",  "sqrtf", "mj_cuda::silu",
    "mj_cuda::gelu_tanh", "mj_cuda::relu", "mj_cuda::sigmoid", "erff",  "erfcf"};

}  // namespace

std::string float_literal(double value) { return common::float_literal(value, kCuda.generator); }

std::string unary_expr(OpKind kind, double scalar, const std::string& x) {
  return common::unary_expr(kCuda, kind, scalar, x);
}

std::string binary_expr(OpKind kind, double scalar, const std::string& a, const std::string& b) {
  return common::binary_expr(kCuda, kind, scalar, a, b);
}

namespace {

// `v = op(...)` for each op of pass[first:], `chained` holding the tensor whose value is v.
void emit_chain_ops(const Emit& e, const std::vector<int>& pass, size_t first, int chained,
                    const std::vector<std::string>& idx) {
  const std::vector<Op>& ops = e.bg.ops();
  for (size_t i = first; i < pass.size(); ++i) {
    const Op& op = ops[pass[i]];
    std::vector<std::string> args;
    for (int t : op.inputs) {
      args.push_back(t == chained ? "v"
                                  : read_element(e, t, broadcast_index(e.bg.tensor(t).shape, idx)));
    }
    e.w.line("v = " +
             (is_unary_elementwise(op.kind)
                  ? unary_expr(op.kind, op.scalar, args.at(0))
                  : binary_expr(op.kind, op.scalar, args.at(0), args.at(1))) +
             ";");
    chained = op.outputs.at(0);
  }
}

}  // namespace

void emit_chain_store(const Emit& e, const std::vector<int>& pass, const std::string& value,
                      const std::vector<std::string>& idx) {
  const std::vector<Op>& ops = e.bg.ops();
  e.w.line("float v = " + value + ";");
  emit_chain_ops(e, pass, 1, ops[pass.front()].outputs.at(0), idx);
  e.w.line(store_element(e, ops[pass.back()].outputs.at(0), idx, "v"));
}

void emit_elementwise_chain(const Emit& e, const std::vector<int>& pass) {
  const std::vector<Op>& ops = e.bg.ops();
  const Op& head = ops[pass.front()];
  const bool elementwise_head = is_elementwise(head.kind);
  if (!elementwise_head && pass.size() == 1) return;  // a lone non-elementwise op
  const int end = ops[pass.back()].outputs.at(0);
  e.w.open("");
  const std::vector<std::string> idx = open_thread_loop(e, e.bg.tensor(end).shape, "i", "flat");
  if (elementwise_head) {
    e.w.line("float v;");
    emit_chain_ops(e, pass, 0, -1, idx);
    e.w.line(store_element(e, end, idx, "v"));
  } else {
    emit_chain_store(e, pass, read_element(e, head.outputs.at(0), idx), idx);
  }
  e.w.close();
  e.w.close();
}

}  // namespace mj::codegen::cuda
