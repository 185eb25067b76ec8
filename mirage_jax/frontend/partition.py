"""Partitioning a flattened jaxpr into regions the superoptimizer can take.

`partition` grows maximal connected, convex regions of supported primitives (those the rule
table, mirage_jax/frontend/primitives.py, admits) in topological order over the nodes of
`flatten` (mirage_jax/frontend/flat.py), and keeps those that hold at least one matmul or
reduction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax.extend.core as jcore

from mirage_jax.frontend import primitives
from mirage_jax.frontend.flat import CustomCall, Env, FlatProgram, Node, Var, flatten, run_nodes
from mirage_jax.frontend.primitives import admit_reason, dot_general_form

# -- regions ---------------------------------------------------------------------------


@dataclass
class Region:
    """A connected, convex set of supported nodes, in topological order."""

    index: int
    nodes: list[Node]
    inputs: list[Var]  # consumed but produced outside; order of first use
    outputs: list[Var]  # produced inside and used outside or by the program outputs
    sources: list[str] = field(default_factory=list)  # distinct "file:line" of its nodes
    # The outermost custom_jvp/custom_vjp calls wholly inside: `evaluate` binds them whole,
    # so differentiating it uses their own rules.
    calls: list[CustomCall] = field(default_factory=list)
    # Why the region may not become a kernel ("" when it may): it holds part of a custom
    # derivative call, whose rule a kernel's backward pass could not keep.
    blocked: str = ""

    @property
    def primitives(self) -> list[str]:
        return [n.name for n in self.nodes]

    def evaluate(self, *inputs: Any) -> list[Any]:
        """Runs the region with jax on values of `inputs` (its custom derivative calls bound
        whole); returns `outputs`' values."""
        env: Env = dict(zip(self.inputs, inputs))
        first = {c.nodes[0].index: c for c in self.calls}
        skip: set[int] = set()
        for node in self.nodes:
            if node.index in skip:
                continue
            call = first.get(node.index)
            if call is not None:
                call.bind(env)
                skip.update(n.index for n in call.nodes)
            else:
                run_nodes([node], env)
        return [env[v] for v in self.outputs]

    def __repr__(self) -> str:
        return (
            f"<region {self.index}: {len(self.nodes)} nodes {self.primitives}, "
            f"{len(self.inputs)} inputs, {len(self.outputs)} outputs>"
        )


@dataclass
class Partition:
    program: FlatProgram
    regions: list[Region]
    unsupported: dict[int, str]  # node index -> reason, for nodes left to plain JAX


def _is_anchor(name: str) -> bool:
    """A region is worth a search only when it holds a matmul or a reduction."""
    found = primitives.rule(name)
    return found is not None and found.anchor


def region_flops(region: Region) -> int:
    """Floating-point operations of the region as written (primitives.flops per node)."""
    return sum(primitives.flops(n) for n in region.nodes)


def partition(closed_jaxpr_or_flat: jcore.ClosedJaxpr | FlatProgram) -> Partition:
    """Finds the regions of `closed_jaxpr_or_flat` (a ClosedJaxpr or a FlatProgram)."""
    prog = (
        closed_jaxpr_or_flat
        if isinstance(closed_jaxpr_or_flat, FlatProgram)
        else flatten(closed_jaxpr_or_flat)
    )
    nodes = prog.nodes
    producers = {v: n for n in nodes for v in n.outvars}
    reasons = {n.index: admit_reason(n, producers) for n in nodes}
    # A custom derivative call joins regions whole or not at all: when part of its body is
    # unsupported, so is the rest (its rule needs the whole call).
    for call in prog.custom_calls:
        inside = [reasons[n.index] for n in call.nodes if reasons[n.index]]
        if inside:
            for n in call.nodes:
                if reasons[n.index] is None:
                    reasons[n.index] = (
                        f"{n.name}: inside a {call.name} whose body also "
                        f"holds unsupported ops ({inside[0]})"
                    )
    supported = {i for i, r in reasons.items() if r is None}

    # anc[i]: bitset of all ancestors of node i.
    anc: list[int] = []
    for n in nodes:
        a = 0
        for v in n.invars:
            p = producers.get(v) if isinstance(v, Var) else None
            if p is not None:
                a |= anc[p.index] | (1 << p.index)
        anc.append(a)

    region_of: dict[int, int] = {}
    members: dict[int, int] = {}  # region id -> bitset
    next_id = 0

    def convex(s: int, extra_anc: int) -> bool:
        cand = extra_anc & ~s
        while cand:
            low = cand & -cand
            u = low.bit_length() - 1
            cand ^= low
            if anc[u] & s:
                return False
        return True

    def anc_of(s: int) -> int:
        a = 0
        t = s
        while t:
            low = t & -t
            a |= anc[low.bit_length() - 1]
            t ^= low
        return a

    # An "nt" matmul reads its rhs transposed, which a kernel graph can only do to a region
    # input: the node computing that rhs (looking through a transpose of it) stays outside.
    nt_rhs_bit = {}
    for n in nodes:
        if n.name == "dot_general" and n.index in supported and dot_general_form(n) == "nt":
            p = producers.get(n.invars[1]) if isinstance(n.invars[1], Var) else None
            if p is not None and p.name == "transpose" and isinstance(p.invars[0], Var):
                p = producers.get(p.invars[0])
            if p is not None:
                nt_rhs_bit[n.index] = 1 << p.index

    def keeps_rhs_outside(s: int) -> bool:
        return not any(s >> i & 1 and s & bit for i, bit in nt_rhs_bit.items())

    def allowed(s: int) -> bool:
        return convex(s, anc_of(s)) and keeps_rhs_outside(s)

    for n in nodes:
        if n.index not in supported:
            continue
        prod_regions = []
        for v in n.invars:
            p = producers.get(v) if isinstance(v, Var) else None
            if p is not None and p.index in region_of:
                r = region_of[p.index]
                if r not in prod_regions:
                    prod_regions.append(r)
        me = 1 << n.index
        choice = None
        if prod_regions:
            merged = me
            for r in prod_regions:
                merged |= members[r]
            if allowed(merged):
                choice = prod_regions
            else:
                for r in sorted(prod_regions, key=lambda r: -bin(members[r]).count("1")):
                    s = members[r] | me
                    if allowed(s):
                        choice = [r]
                        break
        if choice:
            keep = choice[0]
            for r in choice[1:]:
                members[keep] |= members.pop(r)
            members[keep] |= me
            for i in range(len(nodes)):
                if members[keep] >> i & 1:
                    region_of[i] = keep
        else:
            members[next_id] = me
            region_of[n.index] = next_id
            next_id += 1

    # Uses of every var outside each region.
    prog_outs = {v for v in prog.outvars if isinstance(v, Var)}
    regions: list[Region] = []
    for rid in sorted(members, key=lambda r: (members[r] & -members[r]).bit_length()):
        s = members[rid]
        rnodes = [n for n in nodes if s >> n.index & 1]
        if not any(_is_anchor(n.name) for n in rnodes):
            continue
        produced = {v for n in rnodes for v in n.outvars}
        inputs: list[Var] = []
        for n in rnodes:
            for v in n.invars:
                if isinstance(v, Var) and v not in produced and v not in inputs:
                    inputs.append(v)
        used_outside = set(prog_outs)
        for n in nodes:
            if not s >> n.index & 1:
                used_outside.update(v for v in n.invars if isinstance(v, Var))
        outputs = [v for n in rnodes for v in n.outvars if v in used_outside]
        sources: list[str] = []
        for n in rnodes:
            if n.source and n.source not in sources:
                sources.append(n.source)
        calls, blocked = _calls_of(prog.custom_calls, s)
        regions.append(Region(len(regions), rnodes, inputs, outputs, sources, calls, blocked))
    unsupported = {i: r for i, r in reasons.items() if r is not None}
    return Partition(prog, regions, unsupported)


def _calls_of(custom_calls: list[CustomCall], members: int) -> tuple[list[CustomCall], str]:
    """(the outermost custom derivative calls wholly inside the node set `members`, why the
    set may not become a kernel: "" unless it holds part of a call)."""
    whole: list[CustomCall] = []
    blocked = ""
    for call in custom_calls:
        inside = sum(members >> n.index & 1 for n in call.nodes)
        if 0 < inside < len(call.nodes) and not blocked:
            blocked = (
                f"it holds part of a {call.name} (the rest of which runs outside it); a "
                f"kernel's backward pass would lose the call's derivative rule"
            )
        elif inside == len(call.nodes):
            whole.append(call)
    ids = {c.index for c in whole}
    return [c for c in whole if c.parent not in ids], blocked
