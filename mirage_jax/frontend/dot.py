"""A dot_general laid out as a kernel-graph matmul.

The IR's matmul is `A[..., m, k] @ B[..., k, n]`, leading axes broadcast right-aligned. A
dot_general has any batch, contracting and free dims in any order, on operands of any rank,
so it becomes that matmul through layouts (mirage_jax/frontend/layout.py): one operand is A,
with its contracting dims grouped on its last axis and its free dims on the one before; the
other is B, the same contracting dims on its second-to-last axis in the same order, its free
dims on the last; batch dims on leading axes, one group on both. Either operand may be A (the
result's layout says which dims ended up where, so swapping costs nothing). Leading axes of
A may also hold free dims that B then broadcasts over (a `[B, T, D]` activation against a
`[D, F]` weight, when its rows were laid out on two axes).

An operand computed in the region has its layout already and must fit; a lazy one (a layout
change of a region input) is laid out here, as the other needs, and XLA prepares it.

A matmul needs both operands' batch dims on leading axes. A decode step's attention reads
its KV cache as `[B, S, N, H]` with batch dims B and N apart: as a matmul, XLA would copy the
whole cache into `[B, N, S, H]` at every call. When one operand is a vector (no free dim of
size > 1: one query's weights) and both are region inputs, the dot is instead a broadcast
product summed over the contracting dims, in the other operand's stored order
(`vector_product`): the vector is the only operand laid out, and the flops are the matmul's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from jax import lax

from mirage_jax.frontend.flat import Node, Var
from mirage_jax.frontend.layout import FOLD_RANK, MAX_RANK, Groups, presentation, real

# The most elements a vector product's vector may hold in its free dims: each is one more
# pass over the other operand's tile in registers, where a matmul would reuse it from cache.
VECTOR_FREE = 8


@dataclass(frozen=True)
class Side:
    """One dot_general operand: its logical shape, its dims by role, where its batch and free
    dims go in the result, and its layout when it is computed (None: lazy)."""

    shape: tuple[int, ...]
    contract: tuple[int, ...]
    batch: tuple[int, ...]
    free: tuple[int, ...]
    out_dim: dict[int, int]  # batch and free dim -> the result's dim
    groups: Groups | None
    # A lazy operand's held-back transposes (expr.Lazy.perm): logical dim i is dim held[i]
    # of the value XLA holds, so a layout is free when it keeps that value's order.
    held: tuple[int, ...] | None = None

    def reals(self, dims: Sequence[int]) -> set[int]:
        return {d for d in dims if self.shape[d] != 1}


@dataclass(frozen=True)
class Arrangement:
    """The matmul: `a_is_lhs` says which operand is A; layouts of A, B and the result."""

    a_is_lhs: bool
    a_groups: Groups
    b_groups: Groups
    out_groups: Groups
    copies: int  # elements XLA copies to prepare the lazy operands in these layouts


def sides(
    node: Node,
    lhs_groups: Groups | None,
    rhs_groups: Groups | None,
    held: tuple[tuple[int, ...] | None, tuple[int, ...] | None] = (None, None),
) -> tuple[Side, Side]:
    """The lhs and rhs of dot_general `node`, each with its layout or None (lazy), and a
    lazy one's held-back transposes (`held`)."""
    (lc, rc), (lb, rb) = node.params["dimension_numbers"]
    ls, rs = node.invars[0].shape, node.invars[1].shape
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    nb = len(lb)
    lout = {d: i for i, d in enumerate(lb)} | {d: nb + i for i, d in enumerate(lf)}
    rout = {d: i for i, d in enumerate(rb)} | {d: nb + len(lf) + i for i, d in enumerate(rf)}
    lhs = Side(tuple(ls), tuple(lc), tuple(lb), tuple(lf), lout, lhs_groups, held[0])
    rhs = Side(tuple(rs), tuple(rc), tuple(rb), tuple(rf), rout, rhs_groups, held[1])
    return lhs, rhs


def _fits_as_a(s: Side) -> bool:
    g = s.groups
    assert g is not None
    if len(g) < 2 or set(real(g[-1], s.shape)) != s.reals(s.contract) or not real(g[-1], s.shape):
        return False
    if not set(real(g[-2], s.shape)) <= set(s.free):
        return False
    return all(_leading_ok(s, x) for x in g[:-2])


def _fits_as_b(s: Side) -> bool:
    g = s.groups
    assert g is not None
    if len(g) < 2 or set(real(g[-2], s.shape)) != s.reals(s.contract) or not real(g[-2], s.shape):
        return False
    if not set(real(g[-1], s.shape)) <= set(s.free):
        return False
    return all(_leading_ok(s, x) for x in g[:-2])


def _leading_ok(s: Side, g: tuple[int, ...]) -> bool:
    r = set(real(g, s.shape))
    return not r or r <= set(s.batch) or r <= set(s.free)


def _batch_groups(a: Side) -> list[tuple[int, ...]]:
    """A's batch dims of size > 1 on at most FOLD_RANK - 2 leading axes, one each while they
    fit, leading ones folded beyond."""
    groups: list[tuple[int, ...]] = [(d,) for d in a.batch if a.shape[d] != 1]
    while len(groups) > FOLD_RANK - 2:
        groups[0:2] = [groups[0] + groups[1]]
    return groups


def _lead_from(other: Side, og: Groups, me: Side, to_me: dict[int, int]) -> list[tuple[int, ...]]:
    """My leading axes mirroring `other`'s: its batch groups as mine (through `to_me`), a
    size-1 axis where it holds free dims; my batch dims it does not hold lead."""
    lead = []
    for g in og:
        r = real(g, other.shape)
        lead.append(tuple(to_me[d] for d in r) if r and set(r) <= set(other.batch) else ())
    covered = {d for g in lead for d in g}
    missing = tuple(d for d in me.batch if me.shape[d] != 1 and d not in covered)
    return ([missing] if missing else []) + lead


def _arrange(a: Side, b: Side, a_is_lhs: bool) -> Arrangement | None:
    to_b_c = dict(zip(a.contract, b.contract))
    to_a_c = {v: k for k, v in to_b_c.items()}
    to_b_b = dict(zip(a.batch, b.batch))
    to_a_b = {v: k for k, v in to_b_b.items()}
    if a.groups is not None and not _fits_as_a(a):
        return None
    if b.groups is not None and not _fits_as_b(b):
        return None
    ga: Groups
    gb: Groups
    if a.groups is None and b.groups is None:
        lead = _batch_groups(a)
        k = tuple(d for d in a.contract if a.shape[d] != 1)
        k = tuple(sorted(k))
        ga = (*lead, a.free, k)
        gb = (*(tuple(to_b_b[d] for d in g) for g in lead), tuple(to_b_c[d] for d in k), b.free)
    elif a.groups is None:
        assert b.groups is not None
        gb = b.groups
        k = tuple(to_a_c[d] for d in real(gb[-2], b.shape))
        ga = (*_lead_from(b, gb[:-2], a, to_a_b), a.free, k)
    elif b.groups is None:
        ga = a.groups
        k = tuple(to_b_c[d] for d in real(ga[-1], a.shape))
        gb = (*_lead_from(a, ga[:-2], b, to_b_b), k, b.free)
    else:
        ga, gb = a.groups, b.groups
    if len(ga) > FOLD_RANK or len(gb) > FOLD_RANK:
        return None
    if tuple(to_b_c[d] for d in real(ga[-1], a.shape)) != real(gb[-2], b.shape):
        return None
    # leading axes, right-aligned
    la, lb = list(ga[:-2]), list(gb[:-2])
    n = max(len(la), len(lb))
    la = [()] * (n - len(la)) + la
    lb = [()] * (n - len(lb)) + lb
    lead_out: list[tuple[int, ...]] = []
    for x, y in zip(la, lb):
        rx, ry = real(x, a.shape), real(y, b.shape)
        mismatch = not set(rx) <= set(a.batch) or tuple(to_b_b[d] for d in rx) != ry
        if rx and ry and mismatch:
            return None
        dims = [a.out_dim[d] for d in x if d in a.out_dim] + [
            b.out_dim[d] for d in y if d in b.out_dim
        ]
        lead_out.append(tuple(dict.fromkeys(dims)))
    m = tuple(a.out_dim[d] for d in ga[-2] if d in a.free)
    nn = tuple(b.out_dim[d] for d in gb[-1] if d in b.free)
    out = (*lead_out, m, nn)
    flat = [d for g in out for d in g]
    if len(flat) != len(set(flat)) or len(out) > FOLD_RANK:
        return None
    copies = sum(_copies(side, g) for side, g in ((a, ga), (b, gb)) if side.groups is None)
    return Arrangement(a_is_lhs, ga, gb, out, copies)


@dataclass(frozen=True)
class VectorProduct:
    """A dot_general as `sum(vec * big)` over the contracting dims (module doc): which operand
    is `big`, the layouts of both (big's its stored order), the axes of the product summed,
    and the result's layout."""

    big_is_lhs: bool
    big_groups: Groups
    vec_groups: Groups
    summed: tuple[int, ...]
    out_groups: Groups


def vector_product(lhs: Side, rhs: Side) -> VectorProduct | None:
    """The dot of two lazy operands as a broadcast product and a sum, where one (the vector)
    has free dims of at most VECTOR_FREE elements in all and the other fits, one dim per axis,
    with one more axis for those free dims when they are not all of size 1; None otherwise."""
    if lhs.groups is not None or rhs.groups is not None:
        return None
    for big_is_lhs, big, vec in ((True, lhs, rhs), (False, rhs, lhs)):
        wide = sorted(vec.reals(vec.free))
        if prod(vec.shape[d] for d in wide) > VECTOR_FREE or not big.contract:
            continue
        if len(big.shape) + bool(wide) > MAX_RANK:
            continue
        held = big.held or tuple(range(len(big.shape)))
        order = sorted(range(len(big.shape)), key=lambda d: held[d])
        to_vec = dict(zip(big.batch, vec.batch)) | dict(zip(big.contract, vec.contract))
        big_groups: list[tuple[int, ...]] = [(d,) for d in order]
        vec_groups: list[tuple[int, ...]] = [(to_vec[d],) if d in to_vec else () for d in order]
        out: list[tuple[int, ...]] = [(big.out_dim[d],) if d in big.out_dim else () for d in order]
        summed_at = [j for j, d in enumerate(order) if d in big.contract]
        vec_out = tuple(vec.out_dim[d] for d in vec.free)  # size-1 ones: placeholders
        if wide:
            # The vector's free dims (a group's query heads) on an axis of their own, which
            # the other operand broadcasts along, before its last (its innermost stride).
            at = len(order) - 1
            big_groups.insert(at, ())
            vec_groups.insert(at, tuple(wide))
            out.insert(at, vec_out)
            summed_at = [j + (j >= at) for j in summed_at]
        else:
            out[summed_at[0]] = vec_out
        return VectorProduct(
            big_is_lhs, tuple(big_groups), tuple(vec_groups), tuple(summed_at), tuple(out)
        )
    return None


def _copies(side: Side, groups: Groups) -> int:
    """Elements XLA copies to lay lazy `side` out as `groups`: none when the layout keeps
    the order of the value it holds (held-back transposes included, as Builder.place)."""
    p = presentation(groups, side.shape, side.shape)
    held = side.held or tuple(range(len(side.shape)))
    moved = [held[d] for d in p.perm if p.expand[d] != 1]
    return 0 if not p.materialized and moved == sorted(moved) else p.elements


def arrange(lhs: Side, rhs: Side, last: set[int]) -> Arrangement | None:
    """The arrangement of the matmul that puts on the result's last axis a dim of `last`
    (dims a later reduction reduces: a softmax's keys) when it can, and copies the fewest
    elements to lay out its lazy operands; None when none fits the computed operands."""
    found = [x for x in (_arrange(lhs, rhs, True), _arrange(rhs, lhs, False)) if x is not None]
    if not found:
        return None

    def key(x: Arrangement) -> tuple[int, int]:
        misses = bool(last) and not set(x.out_groups[-1]) & last
        return int(misses), x.copies

    return min(found, key=key)


# -- a patch embedding as a matmul -------------------------------------------------------


def patch_conv_reason(node: Node) -> str:
    """ "" when conv_general_dilated `node` is a patch embedding (each window its own patch:
    strides equal to the window, no padding or dilation, one group), else why not."""
    p = node.params
    rhs_spec = p["dimension_numbers"].rhs_spec
    window = tuple(node.invars[1].shape[d] for d in rhs_spec[2:])
    lhs_spec = p["dimension_numbers"].lhs_spec
    spatial = tuple(node.invars[0].shape[d] for d in lhs_spec[2:])
    if tuple(p["window_strides"]) != window:
        return f"conv_general_dilated: strides {p['window_strides']} differ from the window"
    if any(tuple(pad) != (0, 0) for pad in p["padding"]):
        return "conv_general_dilated: with padding"
    if any(d != 1 for d in (*p["lhs_dilation"], *p["rhs_dilation"])):
        return "conv_general_dilated: with dilation"
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        return "conv_general_dilated: grouped"
    if any(s % w for s, w in zip(spatial, window)):
        return "conv_general_dilated: the window does not tile the image"
    return ""


def patch_matmul(node: Node) -> tuple[Node, Node, dict[int, int]]:
    """A patch-embedding conv_general_dilated as (the reshape splitting each spatial dim of
    the image into (patches, window), a dot_general of that with the filters contracting
    features and window, the dot_general's result dim -> the conv's)."""
    spec = node.params["dimension_numbers"]
    image, filters = node.invars
    assert isinstance(image, Var) and isinstance(filters, Var)
    window = {s: filters.shape[r] for s, r in zip(spec.lhs_spec[2:], spec.rhs_spec[2:])}
    split: list[int] = []
    where: dict[int, tuple[int, ...]] = {}  # image dim -> its dims after the split
    for d, size in enumerate(image.shape):
        if d in window:
            where[d] = (len(split), len(split) + 1)
            split += [size // window[d], window[d]]
        else:
            where[d] = (len(split),)
            split.append(size)
    patches_var = Var(-1, split, image.dtype)
    patches = Node(
        -1,
        lax.reshape_p,
        {"new_sizes": tuple(split), "dimensions": None, "sharding": None},
        [image],
        [patches_var],
        node.source,
    )
    feature = where[spec.lhs_spec[1]][0]
    lc = [feature] + [where[s][1] for s in spec.lhs_spec[2:]]
    rc = [spec.rhs_spec[1], *spec.rhs_spec[2:]]
    free = [d for d in range(len(split)) if d not in lc]
    out = node.outvars[0]
    dot_out = Var(-1, [split[d] for d in free] + [filters.shape[spec.rhs_spec[0]]], out.dtype)
    as_dot = Node(
        -1,
        lax.dot_general_p,
        {
            "dimension_numbers": ((tuple(lc), tuple(rc)), ((), ())),
            "precision": None,
            "preferred_element_type": None,
        },
        [patches_var, filters],
        [dot_out],
        node.source,
    )
    to_out: dict[int, int] = {}
    for i, d in enumerate(free):
        image_dim = next(k for k, v in where.items() if d in v)
        if image_dim == spec.lhs_spec[0]:
            to_out[i] = spec.out_spec[0]
        else:
            to_out[i] = spec.out_spec[2 + list(spec.lhs_spec[2:]).index(image_dim)]
    to_out[len(free)] = spec.out_spec[1]
    return patches, as_dot, to_out


def conv_flops(node: Node) -> int:
    """2 · (result elements) · (features · window) of a conv_general_dilated."""
    spec = node.params["dimension_numbers"]
    filters = node.invars[1].shape
    per_output = prod(filters) // max(1, filters[spec.rhs_spec[0]])
    return 2 * int(prod(node.outvars[0].shape)) * int(per_output)
