"""Layouts: which logical (jaxpr) dims each axis of a kernel tensor holds.

A kernel-graph tensor has rank 1..5 (the layouts chosen here fold to 4 axes; a grouped-query
vector product's extra axis makes the 5th), and the IR has no reshape and no transpose, while a
jaxpr value may have any rank and its dims any order. So a logical value is held by a kernel
tensor whose axis j holds a *group* of logical dims, `groups[j]`, outer to inner: row-major,
the group is a reshape of those dims (no copy), and kernel axis j has the product of their
sizes. The leading dims of an activation `[B, T, D]` fold into one axis of rows, `((0, 1),
(2,))`; attention scores of grouped-query attention lie as `((0,), (1,), (3, 2), (4,))`,
the query heads of a group folded into the rows.

- A logical dim held by no axis is broadcast: the value is constant along it (or it has size
  1). A group may hold dims of size 1 (placeholders): they say where the size-1 dim of a
  keepdims reduction lies, so that an operand of full size meets it on the same axis.
- Axes are compared right-aligned, as numpy broadcasts: an axis whose group holds no dim of
  size > 1 has size 1 and broadcasts.

Values computed in a region get their layout where they are computed. A value that is only a
layout change of a region input is laid out at each use, as that use needs
(`present`), and XLA prepares it at the region's boundary: a transpose or a broadcast there
is a copy (`is_free` says which are not), counted in the region's conversion report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

MAX_RANK = 5  # of a kernel-graph tensor (cc/ir/graph.h)
# The layouts the frontend chooses fold neighbouring axes beyond this many; only a vector
# product's extra axis (mirage_jax/frontend/dot.py) reaches MAX_RANK.
FOLD_RANK = 4

Group = tuple[int, ...]
Groups = tuple[Group, ...]


def kernel_shape(groups: Groups, shape: Sequence[int]) -> tuple[int, ...]:
    """The kernel tensor's shape: per axis, the product of its dims' sizes."""
    return tuple(prod(shape[d] for d in g) for g in groups) or (1,)


def real(group: Group, shape: Sequence[int]) -> Group:
    """The dims of `group` that have size > 1 in `shape` (the others are placeholders)."""
    return tuple(d for d in group if shape[d] != 1)


def held(groups: Groups) -> set[int]:
    return {d for g in groups for d in g}


def relabel(groups: Groups, mapping: dict[int, int]) -> Groups:
    """Each dim renamed by `mapping`; dims it does not map are dropped (their axis keeps its
    place, as a size-1 axis when nothing is left in it)."""
    return tuple(tuple(mapping[d] for d in g if d in mapping) for g in groups)


def with_placeholders(groups: Groups, new_dims: Sequence[int], shape: Sequence[int]) -> Groups:
    """`groups` with new size-1 dims (a broadcast_in_dim or reshape that inserts them) put on
    the axes that hold nothing of size > 1, in order, when there are exactly as many: the
    keepdims pattern, reduce then re-insert the reduced dim. Otherwise they are left out
    (held by no axis: broadcast, which size-1 dims always are)."""
    # axes left empty by a reduction first; else those holding only size-1 dims (a leading
    # batch dim of size 1 holds an axis but may share it with the placeholder)
    empty = [j for j, g in enumerate(groups) if not g]
    if len(empty) != len(new_dims):
        empty = [j for j, g in enumerate(groups) if not real(g, shape)]
    if len(empty) != len(new_dims) or not new_dims:
        return groups
    out = list(groups)
    for j, d in zip(empty, sorted(new_dims)):
        out[j] = tuple(x for x in out[j] if x not in new_dims) + (d,)
    return tuple(out)


def reshape(groups: Groups, src: Sequence[int], dst: Sequence[int]) -> Groups | None:
    """The layout of a reshape (src -> dst shapes, no dims permutation) of a value laid out
    as `groups`: splitting a held dim puts its parts on its axis, in order; merging dims
    needs them next to each other, in order, on one axis. None otherwise (the reshape would
    move elements of the kernel tensor)."""
    sd = [d for d in range(len(src)) if src[d] != 1]
    dd = [d for d in range(len(dst)) if dst[d] != 1]
    block_of: dict[int, tuple[list[int], list[int]]] = {}
    i = j = 0
    while i < len(sd) and j < len(dd):
        ins, outs = [sd[i]], [dd[j]]
        ps, pd = src[sd[i]], dst[dd[j]]
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd and i < len(sd):
                ins.append(sd[i])
                ps *= src[sd[i]]
                i += 1
            elif pd < ps and j < len(dd):
                outs.append(dd[j])
                pd *= dst[dd[j]]
                j += 1
            else:
                return None
        for d in ins:
            block_of[d] = (ins, outs)
    if i != len(sd) or j != len(dd):
        return None
    on_axes = held(groups)
    for ins, _ in block_of.values():
        if any(d in on_axes for d in ins) and not all(d in on_axes for d in ins):
            return None  # part of a merged dim broadcast
    out: list[Group] = []
    for g in groups:
        r = list(real(g, src))
        new: list[int] = []
        k = 0
        while k < len(r):
            ins, outs = block_of[r[k]]
            if r[k : k + len(ins)] != ins:
                return None
            new += outs
            k += len(ins)
        out.append(tuple(new))
    return with_placeholders(tuple(out), [d for d in range(len(dst)) if dst[d] == 1], dst)


def merge(
    ga: Groups, sa: Sequence[int], gb: Groups, sb: Sequence[int], so: Sequence[int]
) -> Groups | None:
    """The layout of an elementwise op's result from its operands' (logical shapes sa, sb,
    result so, all of one rank), or None when the two kernel tensors do not broadcast
    against each other in a way that means the logical broadcast."""
    r = max(len(ga), len(gb))
    pa: list[Group | None] = [None] * (r - len(ga)) + list(ga)
    pb: list[Group | None] = [None] * (r - len(gb)) + list(gb)
    out: list[Group] = []
    for a, b in zip(pa, pb):
        ea = real(a, sa) if a is not None else ()
        eb = real(b, sb) if b is not None else ()
        if ea and eb and ea != eb:
            return None
        main = ea or eb
        marks = tuple(dict.fromkeys(d for d in (a or ()) + (b or ()) if so[d] == 1))
        out.append(main + tuple(d for d in marks if d not in main))
    seen: set[int] = set()
    cleaned: list[Group] = []
    for g in out:
        kept = []
        for d in g:
            if d in seen:
                if so[d] != 1:
                    return None  # one dim on two axes
                continue
            seen.add(d)
            kept.append(d)
        cleaned.append(tuple(kept))
    return tuple(cleaned)


@dataclass(frozen=True)
class Presentation:
    """How XLA prepares a lazily laid-out value as a kernel input: broadcast the logical
    value to `expand` (materializing the dims of size 1 a group needs at full size),
    transpose it by `perm`, reshape it to `shape`, the kernel shape of `groups`."""

    groups: Groups
    expand: tuple[int, ...]
    perm: tuple[int, ...]
    shape: tuple[int, ...]
    materialized: bool

    @property
    def is_free(self) -> bool:
        """A plain reshape of the value (XLA makes no copy)."""
        moved = [d for d in self.perm if self.expand[d] != 1]
        return not self.materialized and moved == sorted(moved)

    @property
    def elements(self) -> int:
        return prod(self.shape)


def presentation(groups: Groups, shape: Sequence[int], sizes: Sequence[int]) -> Presentation:
    """A value of logical `shape` laid out as `groups`, its held dims at `sizes` (a dim of
    size 1 in `shape` but not in `sizes` is materialized by broadcasting)."""
    on_axes = held(groups)
    expand = tuple(sizes[d] if d in on_axes else shape[d] for d in range(len(shape)))
    flat = [d for g in groups for d in g]
    perm = tuple(flat + [d for d in range(len(shape)) if d not in on_axes])
    materialized = any(e != s for e, s in zip(expand, shape))
    return Presentation(groups, expand, perm, kernel_shape(groups, expand), materialized)


def present(target: Groups, shape: Sequence[int], so: Sequence[int]) -> Groups | None:
    """The layout in which an operand of logical `shape`, laid out lazily, meets a computed
    operand laid out as `target` in an elementwise op with result shape `so`. Each axis of
    `target` becomes, for this operand, the same group when the operand has any of its dims
    of size > 1 (the others it lacks are then materialized), else a size-1 axis; its dims
    that `target` does not hold become new leading axes. None beyond FOLD_RANK axes (or
    beyond the target's, a vector product's)."""
    out: list[Group] = []
    for g in target:
        out.append(g if real(g, shape) else tuple(d for d in g if so[d] == 1))
    missing = tuple(d for d in range(len(shape)) if shape[d] != 1 and d not in held(target))
    if missing:
        out = [missing, *out]
    if len(out) > max(FOLD_RANK, len(target)):
        return None
    return tuple(out)


def canonical(shape: Sequence[int], policy: str, reduced: Sequence[int] = ()) -> Groups | None:
    """A layout for a value nothing has laid out yet: its dims of size > 1 in logical order,
    in runs split where `reduced` dims meet the others (a reduction needs its dims on axes of
    their own). policy "fold": the leading dims of each run fold into one axis and the last
    dim keeps an axis of its own (the rows of an activation `[B, T, D]` fold into one, the
    features stay); "split": one axis per dim; "fold-swapped": "fold" with its last two axes
    exchanged (an activation computed as `[D, rows]`, so that it can be a matmul's B against
    a weight held as `[out, in]`, as a tied embedding's `x @ embedding.T`, with no copy of the
    weight). Size-1 dims ride along as placeholders.
    Beyond FOLD_RANK axes, neighbouring axes of one kind fold, leading ones first; None when
    that is not enough."""
    n = len(shape)
    if n == 0:
        return ((),)
    dims = [d for d in range(n) if shape[d] != 1]
    if not dims:
        return (tuple(range(n)),)
    runs: list[tuple[bool, list[int]]] = []
    for d in dims:
        kind = d in reduced
        last = d == dims[-1] and not reduced
        if runs and policy != "split" and runs[-1][0] == kind and not last:
            runs[-1][1].append(d)
        else:
            runs.append((kind, [d]))
    while len(runs) > FOLD_RANK:
        pair = next((i for i in range(len(runs) - 1) if runs[i][0] == runs[i + 1][0]), None)
        if pair is None:
            return None
        runs[pair] = (runs[pair][0], runs[pair][1] + runs.pop(pair + 1)[1])
    groups = [list(g) for _, g in runs]
    lead = list(range(dims[0]))  # the size-1 dims before the first of size > 1
    if len(groups) == 1 and lead:
        groups.insert(0, lead)  # a row vector stays a matrix: a matmul needs rank 2
        lead = []
    for d in range(n):
        if shape[d] == 1 and d not in groups[0]:
            # a placeholder, next to the dim of size > 1 after it
            after = [e for e in dims if e > d]
            if after:
                g = next(g for g in groups if after[0] in g)
                g.insert(g.index(after[0]), d)
            else:
                groups[-1].append(d)
    if policy == "fold-swapped" and len(groups) >= 2:
        groups[-2], groups[-1] = groups[-1], groups[-2]
    return tuple(tuple(g) for g in groups)


@dataclass(frozen=True)
class Unlayout:
    """How a kernel output becomes a region output of logical `shape`: reshape it to the
    sizes of its held dims in kernel order (`split`), transpose those into logical order
    (`perm`), reshape in the size-1 dims (`unsqueezed`), broadcast to `shape`."""

    split: tuple[int, ...]
    perm: tuple[int, ...]
    unsqueezed: tuple[int, ...]
    shape: tuple[int, ...]

    @property
    def is_reshape(self) -> bool:
        """Up to the broadcast to `shape`, a reshape: only dims of size 1 move."""
        moved = [i for i in self.perm if self.split[i] != 1]
        return moved == sorted(moved)

    @property
    def is_free(self) -> bool:
        return self.is_reshape and self.unsqueezed == self.shape


def unlayout(groups: Groups, shape: Sequence[int]) -> Unlayout:
    flat = [d for g in groups for d in g]
    split = tuple(shape[d] for d in flat)
    perm = tuple(sorted(range(len(flat)), key=lambda i: flat[i]))
    unsqueezed = tuple(shape[d] if d in flat else 1 for d in range(len(shape)))
    return Unlayout(split, perm, unsqueezed, tuple(shape))
