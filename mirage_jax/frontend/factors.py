"""Which dims of a region can be split across devices, and the region at per-shard shapes
(mirage_jax/rewrite/shard.py partitions by them).

Every dim of every value of a region is given a *factor*: dims that must be split alike
(an elementwise op's operand and result dims, a matmul's batch dims, the kept dims of a
reduction) share one. A factor that is reduced over (a reduction's axes, a matmul's
contracting dims) must stay whole on every device. Every other factor may be split: each
device then runs the region on its slice, and nothing crosses devices. `localize` rewrites a
region for per-shard shapes (the few shape-carrying params follow the new shapes).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from mirage_jax.frontend.flat import Lit, Node, Var
from mirage_jax.frontend.primitives import link_factors
from mirage_jax.frontend.region import Region

Key = Hashable  # a (Var, dim) pair


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Key, Key] = {}

    def find(self, k: Key) -> Key:
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: Key, b: Key) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


@dataclass
class Factors:
    """factor[(var, dim)] -> factor number; `reduced`: the factors that must stay whole."""

    factor: dict[tuple[Var, int], int]
    reduced: set[int]
    count: int

    def of(self, var: Var) -> tuple[int, ...]:
        return tuple(self.factor[(var, d)] for d in range(len(var.shape)))

    def splittable(self, f: int) -> bool:
        return f not in self.reduced


def region_factors(region: Region) -> tuple[Factors | None, str]:
    """(the factors of `region`, "") or (None, why the region's dims cannot be followed)."""
    uf = _UnionFind()
    reduced_keys: list[tuple[Var, int]] = []
    values = list(region.inputs) + [v for n in region.nodes for v in n.outvars]
    for v in values:
        for d in range(len(v.shape)):
            uf.find((v, d))
    for node in region.nodes:
        why = link_factors(node, uf, reduced_keys)
        if why:
            return None, why
    numbers: dict[Key, int] = {}
    factor: dict[tuple[Var, int], int] = {}
    for v in values:
        for d in range(len(v.shape)):
            factor[(v, d)] = numbers.setdefault(uf.find((v, d)), len(numbers))
    reduced = {numbers[uf.find(k)] for k in reduced_keys}
    # Two dims of one value in one factor (x + x @ W with W square: the residual ties W's
    # input dim to its output dim) cannot be split as one: a device would need the slice of
    # both at once. Such a factor stays whole.
    for v in values:
        dims = [factor[(v, d)] for d in range(len(v.shape))]
        reduced.update(f for f in dims if dims.count(f) > 1)
    return Factors(factor, reduced, len(numbers)), ""


_SHAPE_PARAMS = {"broadcast_in_dim": "shape", "reshape": "new_sizes"}


def localize(region: Region, factors: Factors, split: dict[int, int]) -> Region:
    """`region` at per-shard shapes: every dim of factor f divided by split.get(f, 1) (the
    caller checks that each divides). Inputs, outputs and node order correspond one to one."""
    new: dict[Var, Var] = {}

    def local(v: Var) -> Var:
        if v not in new:
            shape = tuple(s // split.get(f, 1) for s, f in zip(v.shape, factors.of(v)))
            new[v] = Var(v.id, shape, v.dtype)
        return new[v]

    def local_operand(v: Var | Lit) -> Var | Lit:
        return local(v) if isinstance(v, Var) else v

    nodes = []
    for n in region.nodes:
        params = dict(n.params)
        outs = [local(v) for v in n.outvars]
        key = _SHAPE_PARAMS.get(n.name)
        if key is not None:
            params[key] = outs[0].shape
        for k in ("sharding", "out_sharding"):
            if k in params:
                params[k] = None
        nodes.append(
            Node(n.index, n.primitive, params, [local_operand(v) for v in n.invars], outs, n.source)
        )
    return Region(
        region.index,
        nodes,
        [local(v) for v in region.inputs],
        [local(v) for v in region.outputs],
        list(region.sources),
    )


def all_values(region: Region) -> list[Var]:
    return list(region.inputs) + [v for n in region.nodes for v in n.outvars]
