"""The search limits a region gets when the user passes no config to `optimize`.

One set of limits does not fit every region: a gated MLP fuses into one kernel only with six
block ops (two matmuls, two accumulators, silu, mul), while six block ops make an attention
region's search ten times longer than the five its online-softmax kernel needs, and attention
wants grids over two axes (batch and heads) where an MLP needs one. A region is judged by
its graph: one with an exp holds a softmax.
"""

from __future__ import annotations

from mirage_jax._search import SearchConfig

# superoptimize times only the best few candidates, so only the cost model's best 8 are
# verified (attention regions find hundreds).
MLP = SearchConfig(max_kernel_ops=1, max_block_ops=6, time_budget_s=60, max_verified=8)
ATTENTION = SearchConfig(preset="attention", max_kernel_ops=1, max_block_ops=5,
                         max_grid_axes=2, max_grids=2, max_forloop_ranges=1,
                         time_budget_s=60, max_verified=8)


def default_config(graph) -> SearchConfig:
    """ATTENTION for a region whose kernel graph has an exp, else MLP."""
    return ATTENTION if any(op.kind == "exp" for op in graph.ops) else MLP
