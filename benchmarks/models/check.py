"""Comparing a function's outputs with jax.jit's: the error the zoo's benchmark reports and
its tests bound."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# Normwise (max |error| over max |jax.jit's output|, per output). float32: the kernels and
# XLA sum in different orders. bfloat16: 8 units in the last place (2^-5): a region that
# rounds its intermediate values at other points than XLA's fusions moves the outputs by as
# much as bfloat16 rounding itself does (jax.jit's bfloat16 outputs of the tiny zoo are
# 0.6-2.4% normwise from the float32 computation with the same weights and inputs).
TOLERANCE = {"f32": 1e-4, "bf16": 2.0**-5}


def compare(got, want) -> dict:
    """{"error": the largest normwise error of a floating output over the elements finite in
    both, "nonfinite": how many elements are not finite in `got` where they are in `want` (or
    the reverse), "differs": how many non-floating outputs (sampled tokens, an index) are not
    equal, "where": what those are}."""
    got_leaves = jax.tree_util.tree_leaves(got)
    want_flat = jax.tree_util.tree_flatten_with_path(want)[0]
    if len(got_leaves) != len(want_flat):
        raise ValueError(f"{len(got_leaves)} outputs where jax.jit has {len(want_flat)}")
    err, bad, differs, where = 0.0, 0, 0, []
    for (path, w), g in zip(want_flat, got_leaves):
        name = jax.tree_util.keystr(path) or "(the output)"
        if not jnp.issubdtype(w.dtype, jnp.floating):
            unequal = np.asarray(g) != np.asarray(w)
            if unequal.any():
                differs += 1
                rows = sorted({int(i[0]) for i in np.argwhere(unequal)}) if unequal.ndim else []
                where.append(f"output {name}: {int(unequal.sum())} elements differ, rows {rows}")
            continue
        g = np.asarray(g, np.float64)
        w = np.asarray(w, np.float64)
        mismatch = np.isfinite(g) != np.isfinite(w)
        if mismatch.any():
            bad += int(mismatch.sum())
            rows = sorted({int(i[0]) for i in np.argwhere(mismatch)}) if g.ndim else []
            where.append(
                f"output {name}: {int(mismatch.sum())} of {g.size} elements not "
                f"finite where jax.jit's are (or the reverse), batch rows {rows}"
            )
        both = np.isfinite(g) & np.isfinite(w)
        if both.any():
            scale = max(float(np.max(np.abs(w[both]))), 1e-30)
            err = max(err, float(np.max(np.abs(g[both] - w[both]))) / scale)
    return dict(error=err, nonfinite=bad, differs=differs, where=where)
