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
from mirage_jax.runtime import cold_inputs as _cold_inputs
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
# The least point ratio at which a straddling interval gets more rounds: any but a loss as
# large as the win asked for. Each kernel of the rewritten program already won its region
# clearly (those of the variant with marginal kernels, by less), so a ratio near 1 with a
# wide interval is more likely a noisy stretch of the machine than a program that lost its
# gain: Llama's batch-8 decode step, its 11 kernels each 1.4-2.5x on their regions, once
# measured 0.99x, interval [0.95, 1.17] over 27 rounds, and ran as jax.jit; its next five
# cold first calls measured 1.36-1.47x. The rounds cost at most decision.EXTRA_BUDGET_S,
# once per signature (the verdict is cached).
MORE_ROUNDS_FROM = 1 / MIN_SPEEDUP
# Object addresses a printed jaxpr may hold (a function in a parameter): not the program.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _text(jaxpr: Any) -> str:
    return _ADDRESS.sub("", str(jaxpr))


def _key(variants: dict[str, Callable[..., Any]], closed: Any, avals: list[Any], cold: bool) -> str:
    signature = ", ".join(f"{a.dtype}{list(a.shape)}" for a in avals)
    if cold:  # a verdict timed with warm inputs does not answer for cold ones
        signature += " (inputs cold)"
    texts = [_text(jax.make_jaxpr(fn)(*avals)) for fn in variants.values()]
    if len(variants) > 1:  # which program each name stands for is part of the verdict
        texts = [f"{name}:\n{text}" for name, text in zip(variants, texts)]
    return verdict_cache.program_key("\n".join(texts), _text(closed), signature)


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


def choose(
    variants: dict[str, Callable[..., Any]],
    plain: Callable[..., Any],
    avals: list[jax.ShapeDtypeStruct],
    closed: Any,
    cache_dir: str | os.PathLike[str] | None = None,
    label: str = "whole program",
    on_loss: str = "it runs as jax.jit; the regions' kernels stay cached",
    cold: bool = False,
) -> tuple[str | None, str]:
    """(the name of the variant to run, or None for jax.jit; what was measured or loaded).

    `variants`: rewritten programs by name, each with more kernels than the one before it
    (the program with the regions' clear winners, then with their marginal ones too). Each
    must be a clear MIN_SPEEDUP win over jax.jit; of two that are, the later runs only when it
    is clearly faster than the earlier (an interval wholly above 1), so a kernel whose gain
    cannot be told from noise is not kept on the strength of one lucky timing. `closed`: the
    plain function's jaxpr; `label`: what the note calls the programs' scope (a region timed
    with its layout copies uses the same choice, mirage_jax/rewrite/boundary.py); `cold`:
    calls rotate over copies of the inputs that the caches cannot hold together
    (mirage_jax/runtime/cold_inputs.py), as a region's inputs arrive in a program that
    streams more than the caches."""
    root = store.using_cache_root(cache_dir) if cache_dir is not None else contextlib.nullcontext()
    with root, jax.ensure_compile_time_eval():
        try:
            key = _key(variants, closed, avals, cold)
        except Exception as e:  # the verdict is an optimization: time without storing it
            key = None
            warnings.warn(
                f"mirage_jax.optimize: the {label} verdict has no key ({e}); timing",
                RuntimeWarning,
                stacklevel=3,
            )
        jitted: dict[str, Callable[..., Any]] = {n: jax.jit(fn) for n, fn in variants.items()}
        if key is None:
            return _measure(jitted, jax.jit(plain), avals, None, label, on_loss, cold)
        with verdict_cache.measuring(key):  # a process deciding the same waits, then follows
            stored = verdict_cache.load(key)
            if stored is not None:
                chosen = stored["chosen"]
                return chosen if chosen in variants else None, (
                    f"{label}: verdict loaded from the cache, measured "
                    f"{stored.get('measured_at', '?')} on {stored.get('host', '?')}: "
                    f"{stored.get('decision', '?')}"
                )
            return _measure(jitted, jax.jit(plain), avals, key, label, on_loss, cold)


def _measure(
    variants: dict[str, Callable[..., Any]],
    plain: Callable[..., Any],
    avals: list[jax.ShapeDtypeStruct],
    key: str | None,
    label: str,
    on_loss: str,
    cold: bool,
) -> tuple[str | None, str]:
    functions = {XLA: plain, **variants}
    try:
        inputs = _inputs(avals)
        sets = _cold_inputs.rotation(inputs) if cold else None
        times, rounds = _profile.median_times(functions, inputs, arg_sets=sets)

        def more(*names: str) -> Callable[[float], Any]:
            pair = {n: functions[n] for n in names}
            return lambda budget_s: _profile.median_times(
                pair, inputs, budget_s=budget_s, arg_sets=sets
            )[0]

        decisions = {
            name: _decision.decide(
                times,
                XLA,
                name,
                more(XLA, name),
                min_speedup=MIN_SPEEDUP,
                more_from=MORE_ROUNDS_FROM,
            )
            for name in variants
        }
        winners = [name for name in variants if decisions[name].kept]
        chosen = winners[0] if winners else None
        described = [f"{n}: {d.describe('jax.jit')}" for n, d in decisions.items()]
        if len(winners) > 1:
            # Only two variants are ever offered: the clear kernels, then the marginal too.
            richer = _decision.decide(
                times, winners[0], winners[1], more(winners[0], winners[1]), min_speedup=1.0
            )
            chosen = winners[1] if richer.kept else winners[0]
            described.append(f"{winners[1]} over {winners[0]}: {richer.describe(winners[0])}")
    except Exception as e:
        # Untimed, a program of kernels that each won their region clearly still runs (as it
        # always did); one that adds kernels that never won clearly does not.
        kept = REWRITTEN if REWRITTEN in variants else None
        return kept, f"{label} not timed ({type(e).__name__}: {e}); runs {kept or 'jax.jit'}"
    medians = ", ".join(f"{times[n] * 1e3:.3f} ms {n}" for n in variants)
    if len(variants) == 1:
        description = decisions[next(iter(variants))].describe()
    else:
        description = "; ".join(described) + f"; runs {chosen or 'jax.jit'}"
    measured = (
        f"{label}: {medians} vs {times[XLA] * 1e3:.3f} ms with jax.jit "
        f"(medians of the first {rounds} rounds on random inputs"
        f"{', evicted from the caches between calls' if cold else ''}); {description}"
    )
    if key is not None and hasattr(times, "samples"):
        first = decisions[chosen or next(iter(variants))]
        doc = {
            "scope": "program",
            "label": label,
            "chosen": chosen if chosen is not None else "jax.jit",
            "ratio": first.ratio,
            "low": first.low,
            "high": first.high,
            "confidence": _decision.CONFIDENCE,
            "rounds": first.rounds,
            "medians": dict(times),
            "decision": description,
        }
        verdict_cache.save_or_warn(key, doc, "the whole program")
    if chosen is not None:
        return chosen, measured
    return None, f"{measured}: {on_loss}"
