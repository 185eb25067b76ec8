"""Whether an optimized function runs its rewritten program or jax.jit of the whole.

Each region's kernel beat XLA on that region alone, but the regions' boundaries also stop
XLA fusing across them: the rewritten program is timed against jax.jit of the whole
function, on random inputs of the signature, and runs only when its win is statistically
clear (mirage_jax/runtime/decision.py). The verdict is stored (mirage_jax/superopt/
verdict_cache.py), keyed by both programs and the signature, so another process on this
machine with the same cache decides the same way without timing.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax.cache import store
from mirage_jax.runtime import decision as _decision
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt import verdict_cache

XLA, REWRITTEN = "xla", "rewritten"
# What the rewritten program must clearly beat jax.jit by. Each of its kernels already won
# its region by a clear 1.10x (runtime/decision.py); the program as a whole only has to show
# that nothing around them undid the gain, and that gain is diluted by the work left to XLA:
# GPT-2's decode step at batch 4, every matmul a kernel, measured 1.14x, interval
# [1.04, 1.30], and ran as jax.jit under the regions' 1.10. The margin above 1 keeps a
# program whose kernels change nothing measurable (a ratio of 1.00-1.02) from flipping
# between processes.
MIN_SPEEDUP = 1.03
# Object addresses a printed jaxpr may hold (a function in a parameter): not the program.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _text(jaxpr: Any) -> str:
    return _ADDRESS.sub("", str(jaxpr))


def _key(rewritten: Callable[..., Any], closed: Any, avals: list[jax.ShapeDtypeStruct]) -> str:
    signature = ", ".join(f"{a.dtype}{list(a.shape)}" for a in avals)
    return verdict_cache.program_key(
        _text(jax.make_jaxpr(rewritten)(*avals)), _text(closed), signature
    )


def _inputs(avals: list[jax.ShapeDtypeStruct]) -> list[jax.Array]:
    rng = np.random.default_rng(0)
    inputs: list[jax.Array] = []
    for a in avals:
        if jnp.issubdtype(a.dtype, jnp.floating):
            x = jnp.asarray(rng.standard_normal(a.shape), a.dtype)
        else:  # integers, booleans, complex numbers, PRNG keys
            x = jnp.zeros(a.shape, a.dtype)
        inputs.append(jax.device_put(x))
    return inputs


def check(
    rewritten: Callable[..., Any],
    plain: Callable[..., Any],
    avals: list[jax.ShapeDtypeStruct],
    closed: Any,
    cache_dir: str | os.PathLike[str] | None = None,
    label: str = "whole program",
    on_loss: str = "it runs as jax.jit; the regions' kernels stay cached",
) -> tuple[bool, str]:
    """(whether to run the rewritten program, what was measured or loaded). `closed`: the
    plain function's jaxpr; `label`: what the note calls the two programs' scope (a region
    timed with its boundary uses the same check, mirage_jax/rewrite/boundary.py)."""
    root = store.using_cache_root(cache_dir) if cache_dir is not None else contextlib.nullcontext()
    with root, jax.ensure_compile_time_eval():
        try:
            key = _key(rewritten, closed, avals)
        except Exception as e:  # the verdict is an optimization: time without storing it
            key = None
            warnings.warn(
                f"mirage_jax.optimize: the {label} verdict has no key ({e}); timing",
                RuntimeWarning,
                stacklevel=3,
            )
        if key is None:
            return _measure(jax.jit(rewritten), jax.jit(plain), avals, None, label, on_loss)
        with verdict_cache.measuring(key):  # a process deciding the same waits, then follows
            stored = verdict_cache.load(key)
            if stored is not None:
                return stored["chosen"] == REWRITTEN, (
                    f"{label}: verdict loaded from the cache, measured "
                    f"{stored.get('measured_at', '?')} on {stored.get('host', '?')}: "
                    f"{stored.get('decision', '?')}"
                )
            return _measure(jax.jit(rewritten), jax.jit(plain), avals, key, label, on_loss)


def _measure(
    fast: Callable[..., Any],
    plain: Callable[..., Any],
    avals: list[jax.ShapeDtypeStruct],
    key: str | None,
    label: str,
    on_loss: str,
) -> tuple[bool, str]:
    functions = {XLA: plain, REWRITTEN: fast}
    try:
        inputs = _inputs(avals)
        times, rounds = _profile.median_times(functions, inputs)

        def more(budget_s: float) -> Any:
            return _profile.median_times(functions, inputs, budget_s=budget_s)[0]

        decision = _decision.decide(times, XLA, REWRITTEN, more, min_speedup=MIN_SPEEDUP)
    except Exception as e:
        return True, f"{label} not timed ({type(e).__name__}: {e})"
    xla_ms, rewritten_ms = times[XLA] * 1e3, times[REWRITTEN] * 1e3
    measured = (
        f"{label}: {rewritten_ms:.3f} ms rewritten vs {xla_ms:.3f} ms with jax.jit "
        f"(medians of the first {rounds} rounds on random inputs); {decision.describe()}"
    )
    if key is not None and hasattr(times, "samples"):
        doc = {
            "scope": "program",
            "label": label,
            "chosen": REWRITTEN if decision.kept else "jax.jit",
            "ratio": decision.ratio,
            "low": decision.low,
            "high": decision.high,
            "confidence": _decision.CONFIDENCE,
            "rounds": decision.rounds,
            "medians": dict(times),
            "decision": decision.describe(),
        }
        verdict_cache.save_or_warn(key, doc, "the whole program")
    if decision.kept:
        return True, measured
    return False, f"{measured}: {on_loss}"
