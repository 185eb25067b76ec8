"""Whether a region's kernel still wins with the layout copies at its boundary.

A region whose inputs the kernel needs in another layout (a weight used transposed, as a
tied embedding's `x @ embedding.T`; a broadcast materialized) gets those copies from XLA
around the kernel, and the kernel's own timing (superoptimize, on inputs already laid out)
does not see them: a transposed 8192 × 768 embedding costs more than the GEMV it feeds.
Such a region is timed again as it runs in the program, the kernel with its copies against
the region as plain JAX, with the whole-program check's statistics and verdict cache
(mirage_jax/rewrite/whole_program.py), so a warm process decides alike without timing. Its
inputs are as cold as the region's own search had them: in a decode step that streams every
layer's weights, Llama's q/k/v region read its 6 MB of weights from memory, where XLA's
projection ran 0.79 ms and the kernels 0.45; timed warm, the weights sat in the last-level
cache, the paired ratio came out 0.94x (medians 0.365 ms with copies, 0.387 ms XLA), and the
region ran as plain JAX.

The other way round, XLA may run the graph's layout faster than the model's own: GPT-2's
tied logits `h @ wte.T` ran 2.36 ms as written and 1.31 ms as the graph lays it out
(`wte @ h.T`), where the best kernel took 1.41. So a region laid out unlike its model
(copies, or a swapped layout: `RegionGraph.as_written`) whose graph XLA won has its
runner-up kernel checked as above too (mirage_jax/rewrite/region.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import jax

from mirage_jax.frontend.region import Region
from mirage_jax.rewrite import whole_program

LABEL = "region with its layout copies"
AS_WRITTEN = "runner-up against the region as written"


def check(
    run: Callable[..., list[Any]],
    region: Region,
    cache_dir: str | os.PathLike[str] | None,
    label: str = LABEL,
    cold: bool = False,
) -> tuple[bool, str]:
    """(whether the kernel `run`, copies included, beats the region as plain JAX, the note
    that begins with `label`). `cold`: timed with its inputs evicted from the caches
    between calls, as the region's own search timed it (the program streams more than the
    caches hold, Settings.cold_caches)."""
    avals = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in region.inputs]
    try:
        with jax.ensure_compile_time_eval():
            closed = jax.make_jaxpr(region.evaluate)(*avals)
    except Exception as e:  # the whole-program check still follows
        return True, f"{label}: not timed ({type(e).__name__}: {e})"
    chosen, note = whole_program.choose(
        {whole_program.REWRITTEN: run},
        region.evaluate,
        avals,
        closed,
        cache_dir,
        label=label,
        on_loss="the region runs as plain JAX",
        cold=cold,
    )
    return chosen is not None, note
