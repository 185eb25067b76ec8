#include "cc/ir/coarsen_loop.h"

#include <optional>
#include <vector>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"

namespace mj::ir {
namespace {

// What a tensor is across the loop's iterations.
struct Role {
  enum Kind { kInvariant, kConcat, kPartial } kind = kInvariant;
  int axis = -1;  // kConcat: the dim along which the steps' values lie side by side
};

bool accumulates_row(OpKind k) {
  return k == OpKind::kAccumSumLast || k == OpKind::kAccumMeanLast || k == OpKind::kAccumRmsLast;
}

// Whether every input is invariant.
bool all_invariant(const std::vector<Role>& role, const Op& op) {
  for (int in : op.inputs) {
    if (role[in].kind != Role::kInvariant) return false;
  }
  return true;
}

// The role of op's output, or nullopt where grouping the steps would change what it is.
std::optional<Role> role_of(const BlockGraph& bg, const std::vector<Role>& role, const Op& op) {
  if (all_invariant(role, op)) {
    // An accumulator of a loop-invariant value counts the iterations.
    if (is_accumulator(op.kind)) return std::nullopt;
    return Role{};
  }
  const Role& x = role[op.inputs[0]];
  const int rank = int(bg.tensor(op.inputs[0]).shape.size());
  if (op.kind == OpKind::kAccumSum) {
    return x.kind == Role::kPartial ? std::optional<Role>(Role{}) : std::nullopt;
  }
  if (accumulates_row(op.kind)) {
    const bool along_rows = x.kind == Role::kConcat && x.axis == rank - 1;
    return along_rows ? std::optional<Role>(Role{}) : std::nullopt;
  }
  if (is_unary_elementwise(op.kind)) {
    return x.kind == Role::kConcat ? std::optional<Role>(x) : std::nullopt;
  }
  if (is_binary_elementwise(op.kind)) {
    const Shape& out = bg.tensor(op.outputs[0]).shape;
    int axis = -1;
    for (int in : op.inputs) {
      if (role[in].kind == Role::kConcat) {
        const Shape& s = bg.tensor(in).shape;
        const int aligned = role[in].axis + int(out.size() - s.size());
        // Both along one dim, neither broadcast along it: a [8, 1] step beside a [8, 4] one
        // would be [8, 2] beside [8, 8] coarsened.
        if ((axis >= 0 && axis != aligned) || s[role[in].axis] != out[aligned]) return std::nullopt;
        axis = aligned;
      } else if (role[in].kind == Role::kPartial) {
        return std::nullopt;
      }
    }
    // An invariant operand broadcasts along the steps' dim (size 1 there, or no such dim).
    for (int in : op.inputs) {
      if (role[in].kind != Role::kInvariant) continue;
      const Shape& s = bg.tensor(in).shape;
      const int own = axis - int(out.size() - s.size());
      if (own >= 0 && s[own] != 1) return std::nullopt;
    }
    return Role{Role::kConcat, axis};
  }
  if (op.kind == OpKind::kMatmul) {
    const Role& b = role[op.inputs[1]];
    const int b_rank = int(bg.tensor(op.inputs[1]).shape.size());
    const bool contracts_steps = x.kind == Role::kConcat && x.axis == rank - 1 &&
                                 b.kind == Role::kConcat && b.axis == b_rank - 2;
    return contracts_steps ? std::optional<Role>(Role{Role::kPartial}) : std::nullopt;
  }
  return std::nullopt;
}

// The roles of bg's tensors, or nullopt where some value is not one of them.
std::optional<std::vector<Role>> roles(const BlockGraph& bg) {
  std::vector<Role> role(bg.tensors().size());
  for (const Op& op : bg.ops()) {
    if (op.kind == OpKind::kInput) {
      if (op.fmap >= 0) role[op.outputs[0]] = Role{Role::kConcat, op.fmap};
      continue;
    }
    if (op.kind == OpKind::kOutput) {
      if (role[op.inputs[0]].kind != Role::kInvariant) return std::nullopt;
      continue;
    }
    const std::optional<Role> r = role_of(bg, role, op);
    if (!r) return std::nullopt;
    for (int out : op.outputs) role[out] = *r;
  }
  return role;
}

}  // namespace

bool loop_coarsens(const BlockGraph& bg) { return bg.forloop_range() > 1 && roles(bg).has_value(); }

std::optional<BlockGraph> coarsen_loop(const BlockGraph& bg, int factor) {
  if (factor < 2 || bg.forloop_range() % factor != 0 || !loop_coarsens(bg)) return std::nullopt;
  BlockGraph out(bg.grid(), bg.forloop_range() / factor);
  std::vector<int> id(bg.tensors().size(), -1);
  // The builders check every rule again; a graph they refuse stays as it was.
  try {
    for (const Op& op : bg.ops()) copy_block_op(bg, op, out, id);
  } catch (const IrError&) {
    return std::nullopt;
  }
  return out;
}

}  // namespace mj::ir
