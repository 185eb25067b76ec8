#include "cc/codegen/cuda/emit_elementwise.h"

#include <cmath>
#include <cstdio>

#include "cc/ir/error.h"

namespace mj::codegen::cuda {

std::string float_literal(double value) {
  const float f = float(value);
  if (!std::isfinite(f)) {
    throw IrError("cuda codegen: constant " + std::to_string(value) +
                  " is not a finite float32");
  }
  char text[48];
  std::snprintf(text, sizeof text, "%af", double(f));
  return text;
}

std::string unary_expr(OpKind kind, double scalar, const std::string& x) {
  switch (kind) {
    case OpKind::kExp: return "expf(" + x + ")";
    case OpKind::kSquare: return "mj_cuda::square(" + x + ")";
    case OpKind::kSqrt: return "sqrtf(" + x + ")";
    case OpKind::kRsqrt: return "1.0f / sqrtf(" + x + ")";
    case OpKind::kSilu: return "mj_cuda::silu(" + x + ")";
    case OpKind::kGelu: return "mj_cuda::gelu_tanh(" + x + ")";
    case OpKind::kRelu: return "mj_cuda::relu(" + x + ")";
    case OpKind::kSigmoid: return "mj_cuda::sigmoid(" + x + ")";
    case OpKind::kNeg: return "-(" + x + ")";
    case OpKind::kRecip: return "1.0f / (" + x + ")";
    case OpKind::kMulScalar: return "(" + x + ") * " + float_literal(scalar);
    case OpKind::kAddScalar: return "(" + x + ") + " + float_literal(scalar);
    default:
      throw IrError("cuda codegen: " + std::string(op_kind_name(kind)) +
                    " is not a unary elementwise op");
  }
}

std::string binary_expr(OpKind kind, const std::string& a, const std::string& b) {
  const char* op = nullptr;
  switch (kind) {
    case OpKind::kAdd: op = " + "; break;
    case OpKind::kSub: op = " - "; break;
    case OpKind::kMul: op = " * "; break;
    case OpKind::kDiv: op = " / "; break;
    default:
      throw IrError("cuda codegen: " + std::string(op_kind_name(kind)) +
                    " is not a binary elementwise op");
  }
  return "(" + a + ")" + op + "(" + b + ")";
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
      args.push_back(t == chained
                         ? "v"
                         : read_element(e, t, broadcast_index(e.bg.tensor(t).shape, idx)));
    }
    e.w.line("v = " +
             (is_unary_elementwise(op.kind) ? unary_expr(op.kind, op.scalar, args.at(0))
                                            : binary_expr(op.kind, args.at(0), args.at(1))) +
             ";");
    chained = op.outputs.at(0);
  }
}

}  // namespace

void emit_chain_store(const Emit& e, const std::vector<int>& pass, const std::string& value,
                      const std::vector<std::string>& idx, const std::string& flat) {
  const std::vector<Op>& ops = e.bg.ops();
  e.w.line("float v = " + value + ";");
  emit_chain_ops(e, pass, 1, ops[pass.front()].outputs.at(0), idx);
  e.w.line(tile_name(ops[pass.back()].outputs.at(0)) + "[" + flat + "] = v;");
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
    e.w.line(tile_name(end) + "[flat] = v;");
  } else {
    emit_chain_store(e, pass, read_element(e, head.outputs.at(0), idx), idx, "flat");
  }
  e.w.close();
  e.w.close();
}

}  // namespace mj::codegen::cuda
