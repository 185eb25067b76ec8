// Graph: tensors, ops and the builders shared by kernel and block graphs.
#include "cc/ir/graph.h"

#include <cmath>

#include "cc/ir/shape_rules.h"

namespace mj::ir {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kInvariant: return "invariant";
    case Phase::kBody: return "body";
    case Phase::kEpilogue: return "epilogue";
  }
  return "invalid_phase";
}

namespace {

// Mixed dtypes compute in float32 (docs/ir-semantics.md).
DType common_dtype(DType a, DType b) { return a == b ? a : DType::kF32; }

void check_finite(const std::string& op, const char* what, double v) {
  if (!std::isfinite(v))
    ir_fail(op, std::string(what) + " must be finite, got " + std::to_string(v));
}

}  // namespace

const Tensor& Graph::tensor(int id) const {
  if (id < 0 || id >= int(tensors_.size())) {
    throw IrError("unknown tensor t" + std::to_string(id) + " (the graph has " +
                  std::to_string(tensors_.size()) + " tensors)");
  }
  return tensors_[id];
}

void Graph::check_id(int id, const char* op_name) const {
  if (id < 0 || id >= int(tensors_.size())) {
    ir_fail(op_name, "unknown tensor t" + std::to_string(id) + " (the graph has " +
                         std::to_string(tensors_.size()) + " tensors)");
  }
}

int Graph::add_op(Op op, const std::vector<Shape>& out_shapes, DType dtype) {
  const std::string name(op.kind == OpKind::kInput ? "new_input" : op_kind_name(op.kind));
  for (int in : op.inputs) check_id(in, name.c_str());
  for (const Shape& s : out_shapes) check_valid_shape(name, "result", s);
  const Phase phase = combine_phases(op);  // may throw; nothing is appended before this
  const int op_index = int(ops_.size());
  const int first = int(tensors_.size());
  op.outputs.clear();
  for (size_t i = 0; i < out_shapes.size(); ++i) {
    Tensor t;
    t.shape = out_shapes[i];
    t.dtype = dtype;
    t.producer = op_index;
    t.output_index = int(i);
    t.phase = phase;
    tensors_.push_back(std::move(t));
    op.outputs.push_back(first + int(i));
  }
  ops_.push_back(std::move(op));
  return out_shapes.empty() ? -1 : first;
}

int Graph::unary(OpKind kind, int x, double scalar) {
  if (!is_unary_elementwise(kind)) {
    ir_fail("unary", "'" + std::string(op_kind_name(kind)) + "' is not a unary elementwise op");
  }
  const std::string name(op_kind_name(kind));
  check_id(x, name.c_str());
  Op op;
  op.kind = kind;
  op.inputs = {x};
  // Only the scalar ops carry a constant; zeroing it elsewhere keeps hashes canonical.
  if (has_scalar(kind)) {
    check_finite(name, "the constant", scalar);
    op.scalar = scalar;
  }
  return add_op(std::move(op), {tensors_[x].shape}, tensors_[x].dtype);
}

int Graph::binary(OpKind kind, int a, int b, double scalar) {
  if (!is_binary_elementwise(kind)) {
    ir_fail("binary", "'" + std::string(op_kind_name(kind)) + "' is not a binary elementwise op");
  }
  const std::string name(op_kind_name(kind));
  check_id(a, name.c_str());
  check_id(b, name.c_str());
  const Shape out = broadcast_shapes(name, tensor_desc(*this, a), tensors_[a].shape,
                                     tensor_desc(*this, b), tensors_[b].shape);
  Op op;
  op.kind = kind;
  op.inputs = {a, b};
  if (has_scalar(kind)) {
    check_finite(name, "the fill constant", scalar);
    op.scalar = scalar;
  }
  return add_op(std::move(op), {out}, common_dtype(tensors_[a].dtype, tensors_[b].dtype));
}

int Graph::matmul(int a, int b) {
  check_id(a, "matmul");
  check_id(b, "matmul");
  const Shape out = matmul_shape("matmul", tensor_desc(*this, a), tensors_[a].shape,
                                 tensor_desc(*this, b), tensors_[b].shape);
  Op op;
  op.kind = OpKind::kMatmul;
  op.inputs = {a, b};
  return add_op(std::move(op), {out}, common_dtype(tensors_[a].dtype, tensors_[b].dtype));
}

int Graph::reduce(int x, int dim, ReduceKind kind) {
  check_id(x, "reduce");
  const Shape& xs = tensors_[x].shape;
  Op op;
  op.kind = OpKind::kReduce;
  op.inputs = {x};
  op.dim = normalize_dim("reduce", tensor_desc(*this, x), int(xs.size()), dim);
  op.reduce = kind;
  const Shape out = reduced_shape(xs, op.dim);
  return add_op(std::move(op), {out}, tensors_[x].dtype);
}

int Graph::rms_norm(int x, double eps) {
  check_id(x, "rms_norm");
  check_finite("rms_norm", "eps", eps);
  Op op;
  op.kind = OpKind::kRmsNorm;
  op.inputs = {x};
  op.scalar = eps;
  return add_op(std::move(op), {tensors_[x].shape}, tensors_[x].dtype);
}

int Graph::concat(int a, int b, int dim) {
  check_id(a, "concat");
  check_id(b, "concat");
  Op op;
  op.kind = OpKind::kConcat;
  op.inputs = {a, b};
  op.dim = normalize_dim("concat", tensor_desc(*this, a), int(tensors_[a].shape.size()), dim);
  const Shape out = concat_shape("concat", tensor_desc(*this, a), tensors_[a].shape,
                                 tensor_desc(*this, b), tensors_[b].shape, op.dim);
  return add_op(std::move(op), {out}, common_dtype(tensors_[a].dtype, tensors_[b].dtype));
}

}  // namespace mj::ir
