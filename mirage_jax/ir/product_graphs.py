"""A product x[m, k] @ w[k, n] as one generated kernel with a given grid and tile height:
the shape the search gives a memory-bound matmul (blocks over w's columns, a loop over k).
The calibration's probes, the benchmarks that sweep grids and tile heights and the matmul
code generator's tests build it here."""

from __future__ import annotations

from mirage_jax.ir.graph import BlockGraph, KernelGraph


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
