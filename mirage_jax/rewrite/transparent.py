"""A region's kernel inside the rewritten program, transparent to jax's transformations:

    custom_vjp( custom_vmap( custom_partitioning(kernel) ) )

- custom_vjp: the backward pass differentiates the original region with XLA (jax.vjp of
  its plain-jax evaluation); the forward pass keeps only the inputs.
- custom_vmap: under vmap the batched region is optimized again at its batched shapes (a
  nested optimized function, whose own regions fall back as usual).
- custom_partitioning (mirage_jax/rewrite/shard.py): under a sharded jit each device runs the
  region on its shard, with a kernel specialized for the per-shard shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax

from mirage_jax.frontend.partition import Region
from mirage_jax.rewrite.explain import RegionReport
from mirage_jax.rewrite.region import Settings
from mirage_jax.rewrite.shard import partitioned

# (a function, the settings to optimize it with) -> the function optimized
Respecialize = Callable[[Callable, Settings], Callable]


def region_function(
    region: Region,
    kernel: Callable,
    report: RegionReport,
    settings: Settings,
    respecialize: Respecialize,
) -> Callable:
    """The kernel of `region` made transparent to grad, vmap and sharding (module doc).
    `respecialize(fn, settings)`: `fn` optimized as a function of its own (the decorator),
    for the batched region under vmap."""

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
            axes = tuple(0 if b else None for b in key[1])

            def batched_region(*xs):
                return jax.vmap(plain, in_axes=axes, axis_size=key[0])(*xs)

            opt = batched[key] = respecialize(
                batched_region, dataclasses.replace(settings, sources=tuple(report.sources))
            )
            which = [i for i, b in enumerate(key[1]) if b]
            report.variants.append(
                (
                    f"under vmap (axis size {key[0]}, batched inputs "
                    f"{which}): optimized again at the batched shapes",
                    opt,
                )
            )
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
