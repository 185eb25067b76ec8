"""Which dims of a region can be split across devices, and the region at per-shard shapes
(DESIGN.md §5.4, sharding).

Every dim of every value of a region is given a *factor*: dims that must be split alike
(an elementwise op's operand and result dims, a matmul's batch dims, the kept dims of a
reduction) share one. A factor that is reduced over (a reduction's axes, a matmul's
contracting dims) must stay whole on every device. Every other factor may be split: each
device then runs the region on its slice, and nothing crosses devices. `localize` rewrites a
region for per-shard shapes (the few shape-carrying params follow the new shapes).
"""

from __future__ import annotations

from dataclasses import dataclass

from mirage_jax.frontend.flat import Node, Var
from mirage_jax.frontend.partition import ELEMENTWISE, IDENTITY, REDUCTIONS, Region

_SAME_SHAPE = ELEMENTWISE | IDENTITY | {"max", "integer_pow", "convert_element_type"}


class _UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, k):
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


@dataclass
class Factors:
    """factor[(var, dim)] -> factor number; `reduced`: the factors that must stay whole."""

    factor: dict
    reduced: set
    count: int

    def of(self, var: Var) -> tuple:
        return tuple(self.factor[(var, d)] for d in range(len(var.shape)))

    def splittable(self, f: int) -> bool:
        return f not in self.reduced


def _non_unit(shape):
    return [i for i, s in enumerate(shape) if s != 1]


def region_factors(region: Region) -> tuple[Factors | None, str]:
    """(the factors of `region`, "") or (None, why the region's dims cannot be followed)."""
    uf = _UnionFind()
    reduced_keys = []
    values = list(region.inputs) + [v for n in region.nodes for v in n.outvars]
    for v in values:
        for d in range(len(v.shape)):
            uf.find((v, d))
    for node in region.nodes:
        why = _link(node, uf, reduced_keys)
        if why:
            return None, why
    numbers: dict = {}
    factor = {}
    for v in values:
        for d in range(len(v.shape)):
            factor[(v, d)] = numbers.setdefault(uf.find((v, d)), len(numbers))
    reduced = {numbers[uf.find(k)] for k in reduced_keys}
    return Factors(factor, reduced, len(numbers)), ""


def _link(node: Node, uf: _UnionFind, reduced: list) -> str:
    """Unites the dims of `node`'s operands and results that must be split alike."""
    name = node.name
    out = node.outvars[0]
    operands = [v for v in node.invars if isinstance(v, Var)]
    if name in _SAME_SHAPE:
        for v in operands:  # equal ranks; a size-1 operand dim is broadcast
            if len(v.shape) not in (0, len(out.shape)):
                return f"{name}: operand rank {len(v.shape)} differs from the result's"
            for d in range(len(v.shape)):
                if v.shape[d] == out.shape[d]:
                    uf.union((v, d), (out, d))
                elif v.shape[d] != 1:
                    return f"{name}: operand shape {v.shape} does not broadcast to {out.shape}"
        return ""
    if name == "broadcast_in_dim":
        (x,) = operands or [None]
        if x is None:
            return ""
        for i, j in enumerate(node.params["broadcast_dimensions"]):
            if x.shape[i] == out.shape[j]:
                uf.union((x, i), (out, j))
        return ""
    if name in ("reshape", "squeeze"):
        (x,) = operands
        a, b = _non_unit(x.shape), _non_unit(out.shape)
        if [x.shape[i] for i in a] != [out.shape[j] for j in b]:
            return f"{name}: {x.shape} -> {out.shape} regroups dims"
        for i, j in zip(a, b):
            uf.union((x, i), (out, j))
        return ""
    if name == "transpose":
        (x,) = operands
        for j, i in enumerate(node.params["permutation"]):
            uf.union((x, i), (out, j))
        return ""
    if name in REDUCTIONS:
        (x,) = operands
        axes = set(node.params["axes"])
        kept = [i for i in range(len(x.shape)) if i not in axes]
        for j, i in enumerate(kept):
            uf.union((x, i), (out, j))
        reduced.extend((x, i) for i in axes)
        return ""
    if name == "dot_general":
        lhs, rhs = node.invars
        if not (isinstance(lhs, Var) and isinstance(rhs, Var)):
            return "dot_general: a constant operand"
        (lc, rc), (lb, rb) = node.params["dimension_numbers"]
        j = 0
        for a, b in zip(lb, rb):
            uf.union((lhs, a), (out, j))
            uf.union((rhs, b), (out, j))
            j += 1
        for a, b in zip(lc, rc):
            uf.union((lhs, a), (rhs, b))
            reduced.append((lhs, a))
        for side, skip in ((lhs, set(lc) | set(lb)), (rhs, set(rc) | set(rb))):
            for a in range(len(side.shape)):
                if a not in skip:
                    uf.union((side, a), (out, j))
                    j += 1
        return ""
    return f"{name}: no rule for how its dims split"


_SHAPE_PARAMS = {"broadcast_in_dim": "shape", "reshape": "new_sizes"}


def localize(region: Region, factors: Factors, split: dict) -> Region:
    """`region` at per-shard shapes: every dim of factor f divided by split.get(f, 1) (the
    caller checks that each divides). Inputs, outputs and node order correspond one to one."""
    new: dict = {}

    def local(v):
        if not isinstance(v, Var):
            return v
        if v not in new:
            shape = tuple(s // split.get(f, 1) for s, f in zip(v.shape, factors.of(v)))
            new[v] = Var(v.id, shape, v.dtype)
        return new[v]

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
        nodes.append(Node(n.index, n.primitive, params, [local(v) for v in n.invars], outs,
                          n.source))
    return Region(region.index, nodes, [local(v) for v in region.inputs],
                  [local(v) for v in region.outputs], list(region.sources))


def all_values(region: Region) -> list:
    return list(region.inputs) + [v for n in region.nodes for v in n.outvars]
