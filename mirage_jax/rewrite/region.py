"""One region of an optimized function: its KernelGraph superoptimized into a kernel, or
why it runs as plain JAX (a `RegionReport`, warned once). How the kernel runs inside the
rewritten program is mirage_jax/rewrite/transparent.py.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from mirage_jax.frontend import RegionNotSupported, region_to_graph
from mirage_jax.frontend.region import Region, region_flops
from mirage_jax.rewrite.explain import RegionReport
from mirage_jax.superopt.config import SearchConfig, default_config
from mirage_jax.superopt.superoptimize import superoptimize


@dataclass(frozen=True)
class Settings:
    """What an `Optimized` passes down to its regions (and to nested re-specializations)."""

    config: SearchConfig | None  # None: per region (superopt.config.default_config)
    backend: str  # "cpu" or "cuda": already resolved from "auto"
    cache_dir: str | os.PathLike[str] | None
    min_region_flops: float
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


def region_kernel(region: Region, settings: Settings) -> tuple[RegionKernel | None, RegionReport]:
    """(a function of the region's input values returning its output values, the report),
    or (None, the report) when the region stays plain JAX (warned, unless it was too small
    by the user's own `min_region_flops` or XLA won the timing)."""

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
    try:
        # Regions are specialized while jax traces (under jit, vmap, grad): the search's
        # timing and float checks must run eagerly, not be staged into that trace.
        with jax.ensure_compile_time_eval():
            config = settings.config
            if config is None:  # the user gave none: limits that suit this region
                config = default_config(rg.graph)
            fast = superoptimize(
                rg.graph,
                config,
                backend=settings.backend,
                cache_dir=settings.cache_dir,
                progress=False,
            )
    except Exception as e:
        return None, warn_fallback(
            new_report("xla", f"superoptimize failed: {type(e).__name__}: {e}")
        )
    if fast.graph is rg.graph or not any(op.kind == "customized" for op in fast.graph.ops):
        return None, new_report("xla", "no candidate beat XLA", fast.report())

    def run(*values):
        outs = fast(*rg.prepare_inputs(values, xp=jnp))
        return rg.finish_outputs(outs, values, xp=jnp)

    text = fast.report()
    copies = rg.layout_ops()
    if copies:  # XLA lays these out around the kernel; the timing above does not see them
        text += "\nlayout copies at the region's boundary:\n" + "\n".join("  " + c for c in copies)
    return run, new_report("kernel", f"{fast.speedup:.2f}x over XLA in its own timing", text)
