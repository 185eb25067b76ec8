"""Where regions are cut between two dependent matmuls.

One fused kernel computes one matmul's output tile by tile; a second matmul that contracts
over the first one's output dim needs all of it, in every block (a transformer layer's
o_proj -> residual -> RMSNorm -> gate/up -> silu * up -> down is three such steps). The
search cannot fuse such a chain into one kernel, and given it whole it spends its budget and
finds nothing: a Llama decode step's region from o_proj to the next layer's projections
searched 4 s, explored 200,000 states and verified none, while the gated MLP inside it is
the paper's fusion (2.5x over XLA here). So the partitioner cuts each chain apart before it
grows regions: after the first matmul's elementwise epilogue (bias, residual, activation,
the gate's product), so that what follows (a norm, the next matmul) starts a region of its
own.

Two chains are left whole. Attention's P @ V reads Q @ K^T only through exp (the softmax):
the online softmax fuses it. And a second matmul contracting over fewer than MIN_CHAIN_K
values (LoRA's rank-r product (X @ A) @ B) fits one kernel: the paper's LoRA fusion.
"""

from __future__ import annotations

from math import prod

from mirage_jax.frontend.flat import Node, Var

# A matmul contracting over fewer values than this may fuse with the matmul it reads.
MIN_CHAIN_K = 128
# The ops of a matmul's epilogue: elementwise and layout ops, which a kernel applies to its
# output tile (a reduction ends the epilogue: it needs the whole row).
EPILOGUE = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "neg",
        "max",
        "logistic",
        "tanh",
        "erf",
        "erfc",
        "integer_pow",
        "square",
        "select_n",
        "convert_element_type",
        "reshape",
        "broadcast_in_dim",
        "transpose",
        "copy",
        "copy_p",
    }
)


def contraction_size(node: Node) -> int:
    (lhs_contract, _), _ = node.params["dimension_numbers"]
    return prod(node.invars[0].shape[d] for d in lhs_contract)


def chain_cuts(nodes: list[Node]) -> set[tuple[int, int]]:
    """(producer, consumer) node index pairs to keep in different regions."""
    producers = {v: n for n in nodes for v in n.outvars}
    consumers: dict[Var, list[Node]] = {}
    for n in nodes:
        for v in n.invars:
            if isinstance(v, Var):
                consumers.setdefault(v, []).append(n)

    def made(n: Node) -> list[Node]:
        return [producers[v] for v in n.invars if isinstance(v, Var) and v in producers]

    by_index = {n.index: n for n in nodes}
    cuts: set[tuple[int, int]] = set()
    for second in nodes:
        if second.name != "dot_general" or contraction_size(second) < MIN_CHAIN_K:
            continue
        # what `second` reads on paths without an exp, and the matmuls those paths start at
        path: set[int] = set()
        firsts: list[Node] = []
        stack = made(second)
        while stack:
            n = stack.pop()
            if n.index in path or n.name == "exp":
                continue
            path.add(n.index)
            if n.name == "dot_general":
                firsts.append(n)
            else:
                stack.extend(made(n))
        # the elementwise ops from which `second` is reached through elementwise ops only (a
        # norm's x * x leads to a reduction first: it is the norm's, not the epilogue's)
        direct: set[int] = set()
        stack = [n for n in made(second) if n.name in EPILOGUE]
        while stack:
            n = stack.pop()
            if n.index not in direct:
                direct.add(n.index)
                stack.extend(m for m in made(n) if m.name in EPILOGUE)
        for first in firsts:
            after = _descendants(first, consumers)
            epilogue = {first.index}
            frontier = [first]
            while frontier:
                n = frontier.pop()
                for v in n.outvars:
                    for c in consumers.get(v, []):
                        # every operand that depends on `first` must be the epilogue's own (x
                        # * rsqrt(mean(x * x)) is the norm's: it reads a reduction of first)
                        own = all(m.index in epilogue for m in made(c) if m.index in after)
                        if c.index in direct and c.index not in epilogue and own:
                            epilogue.add(c.index)
                            frontier.append(c)
            for i in epilogue:
                for v in by_index[i].outvars:
                    for c in consumers.get(v, []):
                        on_path = c.index in path or c is second
                        if on_path and c.index not in epilogue:
                            cuts.add((i, c.index))
    return cuts


def _descendants(node: Node, consumers: dict[Var, list[Node]]) -> set[int]:
    """The indices of the nodes that read `node`'s results, directly or not (and its own)."""
    seen = {node.index}
    stack = [node]
    while stack:
        n = stack.pop()
        for v in n.outvars:
            for c in consumers.get(v, []):
                if c.index not in seen:
                    seen.add(c.index)
                    stack.append(c)
    return seen
