"""Partitioning a flattened jaxpr into regions the superoptimizer can take.

`partition` grows maximal connected, convex regions of supported primitives (those the rule
table, mirage_jax/frontend/primitives.py, admits) in topological order over the nodes of
`flatten` (mirage_jax/frontend/flat.py), and keeps those that hold at least one matmul or
reduction.

Whether a region can be laid out as a kernel graph is only known by converting it
(mirage_jax/frontend/to_graph.py), so the regions are grown again until each converts: a node
that cannot take a computed operand in the layout it was computed in (a LayoutConflict: the
attention einsum of a projection's output, a reshape that regroups the dims of a computed
value) is cut from that operand's region, which then hands the value over at its boundary,
and a node that cannot be converted at all is left out. Before any of that, chains of
dependent matmuls that no one kernel computes are cut apart (mirage_jax/frontend/chains.py).
"""

from __future__ import annotations

import jax.extend.core as jcore

from mirage_jax.frontend import primitives
from mirage_jax.frontend.chains import chain_cuts
from mirage_jax.frontend.expr import LayoutConflict, NodeNotSupported, RegionNotSupported
from mirage_jax.frontend.flat import CustomCall, FlatProgram, Node, Var, flatten
from mirage_jax.frontend.primitives import admit_reason
from mirage_jax.frontend.region import Partition, Region, region_flops
from mirage_jax.frontend.to_graph import region_to_graph

__all__ = ["Partition", "Region", "partition", "region_flops"]


def _is_anchor(name: str) -> bool:
    """A region is worth a search only when it holds a matmul or a reduction."""
    found = primitives.rule(name)
    return found is not None and found.anchor


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
    # (producer, consumer) kept in different regions: dependent matmuls (chains.py) first
    cuts: set[tuple[int, int]] = chain_cuts(nodes)
    converted: set[frozenset[int]] = set()  # node sets known to convert
    while True:
        _whole_calls_only(prog, reasons)
        regions = _grow(prog, reasons, cuts)
        if not _learn(regions, producers, reasons, cuts, converted):
            break
    unsupported = {i: r for i, r in reasons.items() if r is not None}
    return Partition(prog, regions, unsupported)


def _learn(
    regions: list[Region],
    producers: dict[Var, Node],
    reasons: dict[int, str | None],
    cuts: set[tuple[int, int]],
    converted: set[frozenset[int]],
) -> bool:
    """Converts each region (but those of `converted`, which converted in an earlier round);
    records the cut or the node to leave out that each failure asks for. Whether anything
    was learned (then the regions are grown again)."""
    learned = False
    for region in regions:
        key = frozenset(n.index for n in region.nodes)
        if region.blocked or key in converted:
            continue
        try:
            region_to_graph(region)
            converted.add(key)
        except LayoutConflict as e:
            inside = {n.index for n in region.nodes}
            p = producers.get(e.var) if isinstance(e.var, Var) else None
            if p is not None and p.index in inside and (p.index, e.node.index) not in cuts:
                cuts.add((p.index, e.node.index))
                learned = True
            elif reasons.get(e.node.index, "") is None:
                reasons[e.node.index] = e.reason
                learned = True
        except NodeNotSupported as e:
            if reasons.get(e.node.index, "") is None:
                reasons[e.node.index] = e.reason
                learned = True
        except RegionNotSupported:
            pass  # the region stays plain JAX; rewrite/region.py says why
    return learned


def _whole_calls_only(prog: FlatProgram, reasons: dict[int, str | None]) -> None:
    """A custom derivative call joins regions whole or not at all: when part of its body is
    unsupported, so is the rest (its rule needs the whole call)."""
    for call in prog.custom_calls:
        inside = [reasons[n.index] for n in call.nodes if reasons[n.index]]
        if inside:
            for n in call.nodes:
                if reasons[n.index] is None:
                    reasons[n.index] = (
                        f"{n.name}: inside a {call.name} whose body also "
                        f"holds unsupported ops ({inside[0]})"
                    )


def _grow(
    prog: FlatProgram, reasons: dict[int, str | None], cuts: set[tuple[int, int]]
) -> list[Region]:
    nodes = prog.nodes
    producers = {v: n for n in nodes for v in n.outvars}
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

    def uncut(s: int) -> bool:
        return not any(s >> p & 1 and s >> c & 1 for p, c in cuts)

    def allowed(s: int) -> bool:
        return convex(s, anc_of(s)) and uncut(s)

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
    return regions


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
