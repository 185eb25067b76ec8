"""A region of a flattened program: the connected, convex set of nodes that becomes one
KernelGraph (mirage_jax/frontend/to_graph.py), as the partitioner (partition.py) found it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mirage_jax.frontend import primitives
from mirage_jax.frontend.flat import CustomCall, Env, FlatProgram, Node, Var, run_nodes


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


def region_flops(region: Region) -> int:
    """Floating-point operations of the region as written (primitives.flops per node)."""
    return sum(primitives.flops(n) for n in region.nodes)
