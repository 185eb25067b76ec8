"""One region of an optimized function: its KernelGraph superoptimized into a kernel, or
why it runs as plain JAX (a `RegionReport`, warned once). How the kernel runs inside the
rewritten program is mirage_jax/rewrite/transparent.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from mirage_jax.cache import store
from mirage_jax.frontend import RegionNotSupported, region_to_graph
from mirage_jax.frontend.region import Region, region_flops
from mirage_jax.frontend.to_graph import RegionGraph
from mirage_jax.rewrite import boundary, budget, estimate_cache
from mirage_jax.rewrite.explain import RegionReport
from mirage_jax.runtime import decision as _decision
from mirage_jax.superopt.config import SearchConfig, default_config
from mirage_jax.superopt.superoptimize import Superoptimized, keep_kernels, superoptimize


@dataclass(frozen=True)
class Settings:
    """What an `Optimized` passes down to its regions (and to nested re-specializations)."""

    config: SearchConfig | None  # None: per region (superopt.config.default_config)
    backend: str  # "cpu" or "cuda": already resolved from "auto"
    cache_dir: str | os.PathLike[str] | None
    min_region_flops: float
    budget_s: float = budget.DEFAULT_BUDGET_S  # the function's (mirage_jax/rewrite/budget.py)
    verbose: bool = True  # the function's progress line
    # Regions are timed with their inputs evicted from the CPU caches: the function's
    # arguments exceed them (mirage_jax/runtime/cold_inputs.py).
    cold_caches: bool = False
    # Reports name these sources instead of the regions' own (a region optimized again under
    # vmap or per shard is traced from mirage_jax's code; the user's lines are the original's).
    sources: tuple[str, ...] = ()


def _new_report(
    region: Region, chosen: str, reason: str, text: str = "", sources: tuple[str, ...] = ()
) -> RegionReport:
    return RegionReport(
        list(dict.fromkeys(sources or region.sources)),
        region.primitives,
        chosen,
        reason,
        text,
        region_flops(region),
    )


def warn_fallback(r: RegionReport) -> RegionReport:
    warnings.warn(f"mirage_jax.optimize: {r.headline()}", RuntimeWarning, stacklevel=2)
    return r


# A region's kernel: its input values -> its output values.
RegionKernel = Callable[..., list[Any]]
Outcome = tuple[RegionKernel | None, RegionReport]

# Every transformer layer repeats its regions: one superoptimize per distinct graph and
# settings in this process, whatever function or layer it comes from. Values are the
# Superoptimized, or the reason it could not run (a string). Bounded, least recently used
# out first: a long-lived process that meets many shapes would otherwise keep every
# compiled region; one evicted is read back from the verdict and kernel caches.
MEMO_ENTRIES = 512
_SUPEROPTIMIZED: OrderedDict[tuple, Superoptimized | str] = OrderedDict()
_ESTIMATES: OrderedDict[tuple, budget.Estimate] = OrderedDict()
_MEMO_LOCK = threading.Lock()  # background workers share the memo with callers


def _recall(memo: OrderedDict, key: tuple) -> Any:
    with _MEMO_LOCK:
        value = memo.get(key)
        if value is not None:
            memo.move_to_end(key)
        return value


def _remember(memo: OrderedDict, key: tuple, value: Any) -> None:
    with _MEMO_LOCK:
        memo[key] = value
        memo.move_to_end(key)
        while len(memo) > MEMO_ENTRIES:
            memo.popitem(last=False)


def _cache_root(settings: Settings):
    if settings.cache_dir is None:
        return contextlib.nullcontext()
    return store.using_cache_root(settings.cache_dir)


def forget() -> None:
    """Drops this process's memo of superoptimized regions and estimates (for tests that
    change what superoptimize would decide on the same graph)."""
    with _MEMO_LOCK:
        _SUPEROPTIMIZED.clear()
        _ESTIMATES.clear()


@dataclass
class Pending:
    """A region converted to a graph and worth searching, waiting for its share of the
    budget."""

    region: Region
    rg: RegionGraph
    config: SearchConfig
    estimate: budget.Estimate | None  # None: not estimated (kernels forced, or it failed)
    settings: Settings
    # Set by finish when XLA is kept but a checked candidate won by less than a clear margin:
    # its kernel, for the whole program to try (mirage_jax/rewrite/whole_program.py).
    marginal: RegionKernel | None = None

    @property
    def gain_s(self) -> float:
        return self.estimate.gain_s if self.estimate is not None else 0.0

    def report(
        self, chosen: str, reason: str, text: str = "", fast: Superoptimized | None = None
    ) -> RegionReport:
        report = _new_report(self.region, chosen, reason, text, sources=self.settings.sources)
        if fast is not None:  # what the cost model estimated and the timing measured
            report.costs, report.timings = dict(fast.costs), dict(fast.timings)
        return report


def prepare(region: Region, settings: Settings) -> Pending | Outcome:
    """The region converted and estimated (Pending), or its outcome when it runs as plain
    JAX without a search: too small, not convertible, or no possible gain."""

    def new_report(chosen: str, reason: str, text: str = "") -> RegionReport:
        return _new_report(region, chosen, reason, text, sources=settings.sources)

    flops = region_flops(region)
    if flops < settings.min_region_flops:
        return None, new_report(
            "xla", f"{flops} flops < min_region_flops {settings.min_region_flops:g}"
        )
    if region.blocked:
        return None, warn_fallback(new_report("xla", f"kept as plain JAX: {region.blocked}"))
    try:
        rg = region_to_graph(region)
    except RegionNotSupported as e:
        return None, warn_fallback(new_report("xla", f"not expressible as a μGraph: {e.reason}"))
    except Exception as e:  # a bug of the conversion must not reach the user's call
        return None, warn_fallback(
            new_report("xla", f"converting it to a μGraph failed: {type(e).__name__}: {e}")
        )
    config = settings.config if settings.config is not None else default_config(rg.graph)
    if keep_kernels():  # tests force kernels: every region is searched, none estimated
        return Pending(region, rg, config, None, settings)
    key = (rg.graph.hash(), settings.backend, settings.cold_caches)
    estimate = _recall(_ESTIMATES, key)
    if estimate is None:
        try:
            with _cache_root(settings), jax.ensure_compile_time_eval():
                estimate = estimate_cache.load_or_measure(
                    *key,
                    lambda: budget.estimate(rg.graph, flops, settings.backend, *key[2:]),
                )
        except Exception:
            # Only an economy: without an estimate the region is searched, and whatever
            # failed here (no device for the backend, say) fails there with its own report.
            return Pending(region, rg, config, None, settings)
        _remember(_ESTIMATES, key, estimate)
    why_not = estimate.why_not()
    if why_not is not None:
        return None, new_report("xla", why_not)
    return Pending(region, rg, config, estimate, settings)


def finish(pending: Pending, search_s: float | None, top_k: int = 4) -> Outcome:
    """Superoptimizes a pending region with `search_s` seconds of search (None: its config's
    own budget) and returns its kernel, or None and why it runs as plain JAX."""
    rg, settings = pending.rg, pending.settings
    config = pending.config
    if search_s is not None:
        config = dataclasses.replace(config, time_budget_s=search_s)
    root = settings.cache_dir if settings.cache_dir is not None else store.cache_root()
    key = (rg.graph.hash(), settings.backend, str(root), config, top_k, settings.cold_caches)
    fast = _recall(_SUPEROPTIMIZED, key)
    if fast is None:
        try:
            # Regions are specialized while jax traces (under jit, vmap, grad): the search's
            # timing and float checks must run eagerly, not be staged into that trace.
            with jax.ensure_compile_time_eval():
                fast = superoptimize(
                    rg.graph,
                    config,
                    backend=settings.backend,
                    cache_dir=settings.cache_dir,
                    top_k=top_k,
                    progress=False,
                    cold_caches=settings.cold_caches,
                )
        except Exception as e:
            fast = f"superoptimize failed: {type(e).__name__}: {e}"
        _remember(_SUPEROPTIMIZED, key, fast)
    if isinstance(fast, str):
        return None, warn_fallback(pending.report("xla", fast))
    if fast.graph is rg.graph or not any(op.kind == "customized" for op in fast.graph.ops):
        report = pending.report("xla", "no candidate beat XLA", fast.report(), fast)
        if fast.marginal is not None:
            pending.marginal = _runner(rg, fast.marginal)
            report.reason = (
                f"its best candidate won by {fast.marginal.speedup:.2f}x, not a clear "
                f"{_decision.MIN_SPEEDUP:.2f}x (the timings' interval reaches below it): the "
                f"whole program tries it"
            )
            report.report += f"\nmarginal candidate {fast.marginal.graph.hash()}: "
            report.report += fast.marginal.report()
        elif fast.runner_up is not None and not rg.as_written and not keep_kernels():
            return _runner_up_as_written(pending, fast.runner_up, report)
        return None, report
    run = _runner(rg, fast)
    text = fast.report()
    if pending.estimate is not None:
        est = pending.estimate
        text += (
            f"\nroofline: XLA {est.xla_s * 1e3:.3f} ms, fused bound {est.bound_s * 1e3:.3f} ms, "
            f"searched {config.time_budget_s:g} s"
        )
    copies = rg.layout_ops()
    if copies:  # XLA lays these out around the kernel; the timing above does not see them
        text += "\nlayout copies at the region's boundary:\n" + "\n".join("  " + c for c in copies)
        if not keep_kernels():
            wins, note = boundary.check(
                run, pending.region, settings.cache_dir, cold=settings.cold_caches
            )
            text += "\n" + note
            if not wins:
                reason = (
                    f"its kernel won alone ({fast.speedup:.2f}x) but not with its layout copies"
                )
                return None, pending.report("xla", reason, text, fast)
    reason = f"{fast.speedup:.2f}x over XLA in its own timing"
    return run, pending.report("kernel", reason, text, fast)


# A runner-up slower than this fraction of XLA's speed on the graph's layout is not checked
# against the region as written: the model's layout would have to cost XLA that much more
# than the graph's (GPT-2's tied logits cost it 1.8x; its runner-up ran at 0.93).
RUNNER_UP_MIN_RATIO = 0.5


def _runner_up_as_written(pending: Pending, up: Superoptimized, report: RegionReport) -> Outcome:
    """XLA won the region as the graph lays it out, which is not how its model writes it
    (layout copies, or a swapped layout): the runner-up kernel, copies included, may still
    beat the region as written (mirage_jax/rewrite/boundary.py)."""
    rg, settings = pending.rg, pending.settings
    text = f"{report.report}\nlaid out by the {rg.policy!r} policy"
    copies = rg.layout_ops()
    if copies:
        text += ", with layout copies at the region's boundary:\n"
        text += "\n".join("  " + c for c in copies)
    if up.speedup < RUNNER_UP_MIN_RATIO:
        report.report = (
            f"{text}\nits runner-up ran {up.speedup:.2f}x XLA's speed on the graph's layout: "
            f"not checked against the region as written"
        )
        return None, report
    run = _runner(rg, up)
    wins, note = boundary.check(
        run, pending.region, settings.cache_dir, boundary.AS_WRITTEN, settings.cold_caches
    )
    text += f"\nrunner-up candidate {up.graph.hash()}: {up.report()}\n{note}"
    if not wins:
        report.report = text
        return None, report
    reason = (
        f"its runner-up lost to the graph's own layout under XLA ({up.speedup:.2f}x) "
        f"but beats the region as written (layout copies included)"
    )
    return run, pending.report("kernel", reason, text, up)


def _runner(rg: RegionGraph, fast: Superoptimized) -> RegionKernel:
    """The region's input values -> its output values, through `fast`."""

    out_shapes = rg.output_shapes()

    def run(*values):
        # The kernels take the values as the model shaped them: a reshape between a kernel
        # and XLA's ops can cost a copy (XLA duplicated a KV cache's dynamic_update_slice
        # for a reshaped reader, and copied the cache for each).
        outs = fast.call_reshaped(rg.prepare_inputs(values, xp=jnp, reshape=False), out_shapes)
        return rg.finish_outputs(outs, values, xp=jnp)

    return run


def region_kernel(region: Region, settings: Settings) -> Outcome:
    """(a function of the region's input values returning its output values, the report),
    or (None, the report) when the region stays plain JAX (warned, unless it was too small
    by the user's own `min_region_flops`, could not gain, or XLA won the timing). The region
    alone: searched with its config's own budget."""
    prepared = prepare(region, settings)
    if isinstance(prepared, Pending):
        return finish(prepared, None)
    return prepared
