"""One region of an optimized function (DESIGN.md §5.1, §5.4, §5.5): what became of it (a
`RegionReport`), and the function that runs it in the rewritten program.

A region that becomes a kernel runs as

    custom_vjp( custom_vmap( custom_partitioning(kernel) ) )

- custom_vjp: the backward pass differentiates the original region with XLA (jax.vjp of
  its plain-jax evaluation); the forward pass keeps only the inputs.
- custom_vmap: under vmap the batched region is optimized again at its batched shapes (a
  nested `Optimized`, whose own regions fall back as usual).
- custom_partitioning (mirage_jax/rewrite/shard.py): under a sharded jit each device runs the
  region on its shard, with a kernel specialized for the per-shard shapes.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np

from mirage_jax.frontend import RegionNotSupported, region_to_graph
from mirage_jax.frontend.partition import Region
from mirage_jax.rewrite.explain import RegionReport
from mirage_jax.superopt.config import default_config
from mirage_jax.superopt.superoptimize import superoptimize


@dataclass(frozen=True)
class Settings:
    """What an `Optimized` passes down to its regions (and to nested re-specializations)."""

    config: object
    backend: str  # "cpu" or "cuda": already resolved from "auto"
    cache_dir: object
    min_region_flops: float
    # Reports name these sources instead of the regions' own (a region optimized again under
    # vmap or per shard is traced from mirage_jax's code; the user's lines are the original's).
    sources: tuple = ()


def region_flops(region: Region) -> int:
    """Floating-point operations of the region as written: 2·M·N·K per matmul, one per
    element for elementwise ops and reductions (layout changes are free)."""
    total = 0
    for n in region.nodes:
        out = n.outvars[0]
        if n.name == "dot_general":
            (lc, _), _ = n.params["dimension_numbers"]
            k = int(np.prod([n.invars[0].shape[a] for a in lc])) if lc else 1
            total += 2 * int(np.prod(out.shape)) * k
        elif n.name in ("reduce_sum", "reduce_max"):
            total += int(np.prod(n.invars[0].shape))
        elif n.name not in ("broadcast_in_dim", "reshape", "squeeze", "transpose",
                            "convert_element_type", "stop_gradient", "copy", "copy_p"):
            total += int(np.prod(out.shape))
    return total


def _new_report(region: Region, chosen: str, reason: str, text: str = "",
               sources=()) -> RegionReport:
    return RegionReport(list(dict.fromkeys(sources or region.sources)), region.primitives,
                        chosen, reason, text, region_flops(region))


def warn_fallback(r: RegionReport) -> RegionReport:
    warnings.warn(f"mirage_jax.optimize: {r.headline()}", RuntimeWarning, stacklevel=2)
    return r


def region_kernel(region: Region, settings: Settings):
    """(a function of the region's input values returning its output values, the report),
    or (None, the report) when the region stays plain JAX (warned, unless it was too small
    by the user's own `min_region_flops` or XLA won the timing)."""
    import jax
    import jax.numpy as jnp

    def new_report(*args):
        return _new_report(region, *args, sources=settings.sources)

    flops = region_flops(region)
    if flops < settings.min_region_flops:
        return None, new_report("xla", f"{flops} flops < min_region_flops "
                                               f"{settings.min_region_flops:g}")
    if region.blocked:
        return None, warn_fallback(new_report("xla", f"kept as plain JAX: {region.blocked}"))
    try:
        rg = region_to_graph(region)
    except RegionNotSupported as e:
        return None, warn_fallback(new_report("xla",
                                              f"not expressible as a μGraph: {e.reason}"))
    try:
        # Regions are specialized while jax traces (under jit, vmap, grad): the search's
        # timing and float checks must run eagerly, not be staged into that trace.
        with jax.ensure_compile_time_eval():
            config = settings.config
            if config is None:  # the user gave none: limits that suit this region
                config = default_config(rg.graph)
            fast = superoptimize(rg.graph, config, backend=settings.backend,
                                 cache_dir=settings.cache_dir, progress=False)
    except Exception as e:  # noqa: BLE001 (any failure runs the region as plain JAX, named)
        return None, warn_fallback(new_report(
            "xla", f"superoptimize failed: {type(e).__name__}: {e}"))
    if fast.graph is rg.graph or not any(op.kind == "customized" for op in fast.graph.ops):
        return None, new_report("xla", "no candidate beat XLA", fast.report())

    def run(*values):
        outs = fast(*rg.prepare_inputs(values, xp=jnp))
        return rg.finish_outputs(outs, xp=jnp)

    return run, new_report("kernel", f"{fast.speedup:.2f}x over XLA in its own "
                                             f"timing", fast.report())


def region_function(region: Region, kernel, report: RegionReport, settings: Settings):
    """The kernel of `region` made transparent to grad, vmap and sharding (module doc)."""
    import jax

    from mirage_jax.rewrite.shard import partitioned

    def plain(*values):
        return region.evaluate(*values)

    sharded = partitioned(region, kernel, report, settings)
    core = jax.custom_batching.custom_vmap(lambda *values: list(sharded(*values)))
    batched: dict = {}

    @core.def_vmap
    def vmap_rule(axis_size, in_batched, *values):
        key = (int(axis_size), tuple(bool(b) for b in in_batched))
        opt = batched.get(key)
        if opt is None:
            from mirage_jax.rewrite.decorator import Optimized

            axes = tuple(0 if b else None for b in key[1])

            def batched_region(*xs):
                return jax.vmap(plain, in_axes=axes, axis_size=key[0])(*xs)

            opt = batched[key] = Optimized(
                batched_region, settings=dataclasses.replace(settings, sources=tuple(
                    report.sources)))
            which = [i for i, b in enumerate(key[1]) if b]
            report.variants.append((f"under vmap (axis size {key[0]}, batched inputs "
                                    f"{which}): optimized again at the batched shapes", opt))
        outs = opt(*values)
        return list(outs), [True] * len(outs)

    @jax.custom_vjp
    def run(*values):
        return core(*values)

    def fwd(*values):
        return core(*values), values

    def bwd(values, cotangents):
        _, pullback = jax.vjp(plain, *values)
        return tuple(pullback(list(cotangents)))

    run.defvjp(fwd, bwd)
    return run
