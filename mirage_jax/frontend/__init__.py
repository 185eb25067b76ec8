"""The JAX frontend (DESIGN.md §5): partitioning jaxprs into regions and converting each
region into a KernelGraph. The @optimize wrapper builds on these."""

from mirage_jax.frontend.flat import FlatProgram, Lit, Node, Var, flatten
from mirage_jax.frontend.partition import Partition, Region, partition
from mirage_jax.frontend.to_graph import (
    GraphInput,
    GraphOutput,
    RegionGraph,
    RegionNotSupported,
    region_to_graph,
)

__all__ = [
    "FlatProgram",
    "GraphInput",
    "GraphOutput",
    "Lit",
    "Node",
    "Partition",
    "Region",
    "RegionGraph",
    "RegionNotSupported",
    "Var",
    "flatten",
    "partition",
    "region_to_graph",
]
