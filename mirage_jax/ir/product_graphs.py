"""A product x[m, k] @ w[k, n] as one generated kernel with a given grid and tile height:
the shape the search gives a memory-bound matmul (blocks over w's columns, a loop over k).
The calibration's probes, the benchmarks that sweep grids and tile heights and the matmul
code generator's tests build it here."""

from __future__ import annotations

from mirage_jax.ir.graph import BlockGraph, KernelGraph

# A prefill's projection as the search splits it, x[256, 1024] @ w[1024, 1024] in k tiles of
# 256: the product whose bfloat16-weight rate the decorator's search estimate
# (rewrite/budget.py) and the cost model's calibration (superopt/calibration.py) time.
PREFILL_PROJECTION = (256, 1024, 1024, 256)


def column_split_product(
    m: int,
    k: int,
    n: int,
    blocks: int,
    k_tile: int,
    x_dtype: str = "float32",
    w_dtype: str = "float32",
) -> KernelGraph:
    """x[m, k] @ w[k, n]: `blocks` blocks over n, a loop over k taking `k_tile` rows of w (and
    columns of x) per iteration. ValueError unless they divide n and k."""
    if blocks < 1 or k_tile < 1 or n % blocks or k % k_tile:
        raise ValueError(
            f"column_split_product: {blocks} blocks and tiles of {k_tile} do not divide "
            f"n={n} and k={k}"
        )
    kg = KernelGraph()
    x, w = kg.new_input((m, k), x_dtype), kg.new_input((k, n), w_dtype)
    bg = BlockGraph(grid=(blocks, 1, 1), forloop_range=k // k_tile)
    split = (1 if blocks > 1 else -1, -1, -1)  # w's columns over the blocks
    xb = bg.new_input(x, imap=(-1, -1, -1), fmap=1)
    wb = bg.new_input(w, imap=split, fmap=0)
    bg.new_output(bg.accum_sum(bg.matmul(xb, wb)), omap=split)
    (y,) = kg.customized([x, w], bg)
    kg.mark_output(y)
    return kg


def prefill_projection(blocks: int, x_dtype: str) -> KernelGraph:
    """PREFILL_PROJECTION with a bfloat16 w, over as many blocks as divide its columns and do
    not exceed `blocks` (3 cores: 2 blocks)."""
    m, k, n, k_tile = PREFILL_PROJECTION
    return column_split_product(m, k, n, fitting_blocks(n, blocks), k_tile, x_dtype, "bfloat16")


def fitting_blocks(n: int, wanted: int) -> int:
    """The most blocks, at most `wanted` (and at least 1), that split n columns evenly: a grid
    per core on a machine whose core count does not divide the probe's columns."""
    return max(b for b in range(1, max(1, wanted) + 1) if n % b == 0)
