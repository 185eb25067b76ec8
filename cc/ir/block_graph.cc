// BlockGraph: tiles cut by imap/fmap, for-loop accumulators, phases, stores by omap.
#include <cmath>

#include "cc/ir/shape_rules.h"

namespace mj::ir {

namespace {

std::string dim3_str(const Dim3& d) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) +
         ")";
}

const char* const kAxisName[3] = {"x", "y", "z"};

}  // namespace

BlockGraph::BlockGraph(Dim3 grid, int forloop_range) : grid_(grid), forloop_range_(forloop_range) {
  for (int a = 0; a < 3; ++a) {
    if (grid[a] < 1) {
      ir_fail("BlockGraph", "grid " + dim3_str(grid) + " has axis " + kAxisName[a] + " = " +
                                std::to_string(grid[a]) + "; grid entries must be >= 1");
    }
  }
  if (forloop_range < 1) {
    ir_fail("BlockGraph", "forloop_range " + std::to_string(forloop_range) + " must be >= 1");
  }
}

int BlockGraph::new_input(const Shape& kernel_shape, DType dtype, Dim3 imap, int fmap) {
  const std::string op = "new_input";
  check_valid_shape(op, "kernel shape", kernel_shape);
  const int rank = int(kernel_shape.size());
  const std::string ks = "kernel tensor " + shape_str(kernel_shape);
  Shape tile = kernel_shape;
  for (int a = 0; a < 3; ++a) {
    const int d = imap[a];
    if (d == -1) continue;
    if (d < -1 || d >= rank) {
      ir_fail(op, "imap " + dim3_str(imap) + " names dim " + std::to_string(d) + " on axis " +
                      kAxisName[a] + ", which " + ks + " does not have (rank " +
                      std::to_string(rank) + ")");
    }
    if (grid_[a] == 1) {
      ir_fail(op, "imap " + dim3_str(imap) + " splits dim " + std::to_string(d) + " along axis " +
                      kAxisName[a] + " whose grid size is 1; use -1 there");
    }
    for (int b = 0; b < a; ++b) {
      if (imap[b] == d) {
        ir_fail(op, "imap " + dim3_str(imap) + " splits dim " + std::to_string(d) +
                        " along two grid axes (" + kAxisName[b] + " and " + kAxisName[a] + ")");
      }
    }
    if (tile[d] % grid_[a] != 0) {
      ir_fail(op, "imap splits dim " + std::to_string(d) + " of size " + std::to_string(tile[d]) +
                      " of " + ks + " into " + std::to_string(grid_[a]) + " parts (grid axis " +
                      kAxisName[a] + "), which does not divide");
    }
    tile[d] /= grid_[a];
  }
  if (fmap < -1 || fmap >= rank) {
    ir_fail(op, "fmap names dim " + std::to_string(fmap) + ", which " + ks +
                    " does not have (rank " + std::to_string(rank) + ")");
  }
  if (fmap >= 0) {
    if (tile[fmap] % forloop_range_ != 0) {
      ir_fail(op, "fmap splits dim " + std::to_string(fmap) + " of size " +
                      std::to_string(tile[fmap]) + " (per block) of " + ks + " into " +
                      std::to_string(forloop_range_) +
                      " parts (forloop_range), which does not divide");
    }
    tile[fmap] /= forloop_range_;
  }
  Op o;
  o.kind = OpKind::kInput;
  o.imap = imap;
  o.fmap = fmap;
  o.io_index = int(inputs_.size());
  const int id = add_op(std::move(o), {tile}, dtype);
  inputs_.push_back(id);
  kernel_in_shapes_.push_back(kernel_shape);
  kernel_in_dtypes_.push_back(dtype);
  return id;
}

int BlockGraph::accum(OpKind kind, int x, double scalar) {
  const OpClass cls = is_accumulator(kind) ? op_info(kind).cls : OpClass::kBoundary;
  if (cls != OpClass::kAccum && cls != OpClass::kAccumLast) {
    ir_fail("accum", "'" + std::string(op_kind_name(kind)) +
                         "' is not a single-input accumulator (accum_exp_matmul has its own "
                         "builder)");
  }
  const std::string name(op_kind_name(kind));
  check_id(x, name.c_str());
  Op op;
  op.kind = kind;
  op.inputs = {x};
  if (has_scalar(kind)) {
    if (!std::isfinite(scalar)) ir_fail(name, "eps must be finite");
    op.scalar = scalar;
  }
  Shape out = tensors_[x].shape;
  if (cls == OpClass::kAccumLast) out.back() = 1;
  return add_op(std::move(op), {out}, tensors_[x].dtype);
}

int BlockGraph::accum_exp_matmul(int s, int v) {
  check_id(s, "accum_exp_matmul");
  check_id(v, "accum_exp_matmul");
  const Shape out = matmul_shape("accum_exp_matmul", tensor_desc(*this, s), tensors_[s].shape,
                                 tensor_desc(*this, v), tensors_[v].shape);
  Op op;
  op.kind = OpKind::kAccumExpMatmul;
  op.inputs = {s, v};
  const DType dt = tensors_[s].dtype == tensors_[v].dtype ? tensors_[s].dtype : DType::kF32;
  return add_op(std::move(op), {out}, dt);
}

void BlockGraph::new_output(int t, Dim3 omap, DType dtype) {
  const std::string op = "new_output";
  check_id(t, op.c_str());
  const Tensor& x = tensors_[t];
  const std::string xd = tensor_desc(*this, t);
  if (x.phase == Phase::kBody && forloop_range_ > 1) {
    ir_fail(op, xd + " is in the loop body; with forloop_range " + std::to_string(forloop_range_) +
                    " only epilogue or loop-invariant tensors can be stored (accumulate first)");
  }
  const int rank = int(x.shape.size());
  Shape kernel_shape = x.shape;
  for (int a = 0; a < 3; ++a) {
    const int d = omap[a];
    if (grid_[a] > 1 && d == -1) {
      ir_fail(op, "omap " + dim3_str(omap) + " has -1 on axis " + kAxisName[a] + " with grid " +
                      std::to_string(grid_[a]) + "; storing " + xd +
                      " would need a cross-block reduction");
    }
    if (d == -1) continue;
    if (d < -1 || d >= rank) {
      ir_fail(op, "omap " + dim3_str(omap) + " names dim " + std::to_string(d) + " on axis " +
                      kAxisName[a] + ", which " + xd + " does not have");
    }
    if (grid_[a] == 1) {
      ir_fail(op, "omap " + dim3_str(omap) + " names dim " + std::to_string(d) + " on axis " +
                      kAxisName[a] + " whose grid size is 1; use -1 there");
    }
    for (int b = 0; b < a; ++b) {
      if (omap[b] == d) {
        ir_fail(op, "omap " + dim3_str(omap) + " repeats dim " + std::to_string(d) + " (axes " +
                        kAxisName[b] + " and " + kAxisName[a] + ")");
      }
    }
    kernel_shape[d] *= grid_[a];
  }
  Op o;
  o.kind = OpKind::kOutput;
  o.inputs = {t};
  o.omap = omap;
  o.io_index = int(outputs_.size());
  add_op(std::move(o), {}, dtype);
  outputs_.push_back(t);
  kernel_out_shapes_.push_back(kernel_shape);
  kernel_out_dtypes_.push_back(dtype);
}

Phase BlockGraph::combine_phases(const Op& op) const {
  const std::string name(op.kind == OpKind::kInput ? "new_input" : op_kind_name(op.kind));
  if (op.kind == OpKind::kInput) return op.fmap >= 0 ? Phase::kBody : Phase::kInvariant;
  if (op.kind == OpKind::kOutput) return Phase::kInvariant;  // defines no tensor
  if (is_accumulator(op.kind)) {
    for (int in : op.inputs) {
      if (tensors_[in].phase == Phase::kEpilogue) {
        ir_fail(name, "input " + tensor_desc(*this, in) +
                          " is in the epilogue; an accumulator takes a body or loop-invariant "
                          "tensor");
      }
    }
    return Phase::kEpilogue;
  }
  Phase phase = Phase::kInvariant;
  int first_variant = -1;
  for (int in : op.inputs) {
    const Phase p = tensors_[in].phase;
    if (p == Phase::kInvariant) continue;
    if (first_variant >= 0 && p != phase) {
      ir_fail(name, "mixes " + std::string(phase_name(phase)) + " tensor " +
                        tensor_desc(*this, first_variant) + " with " + phase_name(p) + " tensor " +
                        tensor_desc(*this, in) +
                        "; inputs must all be in the body or all in the epilogue");
    }
    phase = p;
    if (first_variant < 0) first_variant = in;
  }
  return phase;
}

}  // namespace mj::ir
