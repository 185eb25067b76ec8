"""The JAX frontend: a jaxpr flattened (flat.py), partitioned into regions (partition.py)
and each region converted into a KernelGraph (to_graph.py), every step reading the one rule
table of jaxpr primitives (primitives.py). It knows no search and no compiler; the
@optimize decorator (mirage_jax/rewrite/) builds on it."""

from mirage_jax.frontend.expr import RegionNotSupported
from mirage_jax.frontend.flat import (
    CONTROL_FLOW,
    FlatProgram,
    Lit,
    Node,
    Var,
    flatten,
    sub_programs,
)
from mirage_jax.frontend.partition import partition
from mirage_jax.frontend.region import Partition, Region
from mirage_jax.frontend.to_graph import GraphInput, GraphOutput, RegionGraph, region_to_graph

__all__ = [
    "CONTROL_FLOW",
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
    "sub_programs",
]
