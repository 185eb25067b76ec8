"""Whether a region's kernel still wins with the layout copies at its boundary.

A region whose inputs the kernel needs in another layout (a weight used transposed, as a
tied embedding's `x @ embedding.T`; a broadcast materialized) gets those copies from XLA
around the kernel, and the kernel's own timing (superoptimize, on inputs already laid out)
does not see them: a transposed 8192 × 768 embedding costs more than the GEMV it feeds.
Such a region is timed again as it runs in the program, the kernel with its copies against
the region as plain JAX, with the whole-program check's statistics and verdict cache
(mirage_jax/rewrite/whole_program.py), so a warm process decides alike without timing.

The other way round, XLA may run the graph's layout faster than the model's own: GPT-2's
tied logits `h @ wte.T` ran 2.36 ms as written and 1.31 ms as the graph lays it out
(`wte @ h.T`), where the best kernel took 1.41. A region whose graph XLA won is then timed
as written, briefly (`slower_as_written`), and when that is slower than the runner-up
kernel, checked as above.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import jax

from mirage_jax.frontend.region import Region
from mirage_jax.rewrite import whole_program
from mirage_jax.runtime import cold_inputs
from mirage_jax.runtime import decision as _decision
from mirage_jax.runtime import profile as _profile

LABEL = "region with its layout copies"


def check(
    run: Callable[..., list[Any]],
    region: Region,
    cache_dir: str | os.PathLike[str] | None,
) -> tuple[bool, str]:
    """(whether the kernel `run`, copies included, beats the region as plain JAX, the note)."""
    avals = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in region.inputs]
    try:
        with jax.ensure_compile_time_eval():
            closed = jax.make_jaxpr(region.evaluate)(*avals)
    except Exception as e:  # the whole-program check still follows
        return True, f"{LABEL}: not timed ({type(e).__name__}: {e})"
    chosen, note = whole_program.choose(
        {whole_program.REWRITTEN: run},
        region.evaluate,
        avals,
        closed,
        cache_dir,
        label=LABEL,
        on_loss="the region runs as plain JAX",
    )
    return chosen is not None, note


# How long the region as written is timed to tell whether a runner-up could win.
AS_WRITTEN_BUDGET_S = 0.2


def slower_as_written(region: Region, kernel_s: float, cold_caches: bool) -> tuple[bool, str]:
    """(whether the region as its model writes it, jax.jit of its jaxpr, takes clearly longer
    than `kernel_s`, the note). Timed on random inputs, evicted from the caches between
    calls when `cold_caches`, as superoptimize timed the kernel."""
    avals = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in region.inputs]
    try:
        with jax.ensure_compile_time_eval():
            inputs = whole_program.random_inputs(avals)
            sets = cold_inputs.rotation(inputs) if cold_caches else None
            times, _ = _profile.median_times(
                {"as written": jax.jit(region.evaluate)},
                inputs,
                budget_s=AS_WRITTEN_BUDGET_S,
                arg_sets=sets,
            )
    except Exception as e:
        return False, f"the region as written: not timed ({type(e).__name__}: {e})"
    written = times["as written"]
    slower = written > kernel_s * _decision.MIN_SPEEDUP
    return slower, (
        f"the region as written: {written * 1e3:.3f} ms with jax.jit, its runner-up kernel "
        f"{kernel_s * 1e3:.3f} ms alone"
    )
