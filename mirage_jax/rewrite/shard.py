"""Per-shard kernels under a sharded jit: a region's kernel wrapped in
`jax.experimental.custom_partitioning`.

A plain custom call has no partitioning rule, so XLA would gather every operand onto each
device before it. Here the sharding rule names, for every dim of the region's inputs and
outputs, its factor (mirage_jax/frontend/factors.py); the factors that are reduced over must
stay whole (need-replication), the rest may follow the operands' shardings. When XLA
partitions the program, `partition` receives the operands' shardings, keeps the consistent
part of them, and lowers the region at its per-shard shapes: superoptimized again for those
shapes (cached), or its plain-jax evaluation on the shard when that fails (warned). Either
way each device works on its own slice and no operand is gathered.

On one device, and inside a shard_map over every mesh axis, jax inlines the kernel itself.
"""

from __future__ import annotations

import dataclasses
import warnings

from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec

from mirage_jax.frontend.factors import all_values, localize, region_factors
from mirage_jax.rewrite.region import region_kernel


def _spec_axes(entry) -> tuple:
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    if isinstance(entry, (tuple, list)):
        return tuple(a for a in entry if isinstance(a, str))
    return ()  # P.UNCONSTRAINED and the like: treated as whole


def partitioned(region, kernel, report, settings):
    """`kernel` (a function of the region's inputs) as a custom_partitioning function, or
    `kernel` itself when the region has no dim that may be split."""
    factors, why = region_factors(region)
    if factors is None:
        report.variants.append(
            ("sharding", f"not partitioned ({why}); under a sharded jit its inputs are gathered")
        )
        return kernel
    names = [f"f{i}" for i in range(factors.count)]
    splittable = [i for i in range(factors.count) if factors.splittable(i)]
    if not any(i in splittable for v in region.inputs for i in factors.of(v)):
        return kernel

    # A rule names each dim of a tensor by a factor of its own: where two dims of one value
    # share a factor (region_factors keeps it whole), the second gets a fresh, whole one.
    fresh: list[str] = []

    def dims(v):
        seen, out = set(), []
        for f in factors.of(v):
            if f in seen:
                fresh.append(f"t{len(fresh)}")
                out.append(fresh[-1])
            else:
                seen.add(f)
                out.append(names[f])
        return " ".join(out)

    def side(values):
        return ", ".join(dims(v) for v in values)

    rule = f"{side(region.inputs)} -> {side(region.outputs)}"
    in_rule = {f for v in region.inputs + region.outputs for f in factors.of(v)}
    need_replication = tuple(names[i] for i in sorted(factors.reduced & in_rule)) + tuple(fresh)
    values = all_values(region)
    local_kernels: dict = {}

    def choose_axes(mesh, shardings):
        """factor -> mesh axes: the operands' shardings, made consistent and divisible."""
        chosen: dict[int, tuple[str, ...]] = {}
        used: set[str] = set()
        for v, sharding in zip(region.inputs, shardings):
            spec = tuple(getattr(sharding, "spec", ()) or ())
            for d, f in enumerate(factors.of(v)):
                axes = _spec_axes(spec[d] if d < len(spec) else None)
                if not axes or f in chosen or not factors.splittable(f):
                    continue
                if used & set(axes) or any(a not in mesh.shape for a in axes):
                    continue
                n = 1
                for a in axes:
                    n *= mesh.shape[a]
                if all(
                    s % n == 0 for u in values for s, g in zip(u.shape, factors.of(u)) if g == f
                ):
                    chosen[f] = axes
                    used |= set(axes)
        return chosen

    def shardings_for(mesh, chosen, vs):
        def entry(f):
            axes = chosen.get(f, ())
            return None if not axes else axes[0] if len(axes) == 1 else axes

        return [NamedSharding(mesh, PartitionSpec(*[entry(f) for f in factors.of(v)])) for v in vs]

    def local_kernel(mesh, chosen):
        split = {}
        for f, axes in chosen.items():
            n = 1
            for a in axes:
                n *= mesh.shape[a]
            split[f] = n
        if all(n == 1 for n in split.values()):
            return kernel
        key = tuple(sorted(split.items()))
        if key not in local_kernels:
            local = localize(region, factors, split)
            run, local_report = region_kernel(
                local, dataclasses.replace(settings, sources=tuple(report.sources))
            )
            shapes = ", ".join(str(list(v.shape)) for v in local.inputs)
            report.variants.append((f"per shard (inputs {shapes})", local_report))
            local_kernels[key] = run if run is not None else local.evaluate
        return local_kernels[key]

    def gathered_dims(shardings, chosen):
        """ "input i dim d (mesh axes)" for every operand dim that arrives split but is not
        split in the chosen partitioning."""
        out = []
        for i, (v, sharding) in enumerate(zip(region.inputs, shardings)):
            spec = tuple(getattr(sharding, "spec", ()) or ())
            for d, f in enumerate(factors.of(v)):
                axes = _spec_axes(spec[d] if d < len(spec) else None)
                if axes and chosen.get(f, ()) != axes:
                    why = (
                        "reduced over"
                        if not factors.splittable(f)
                        else "its axes taken by another dim or not dividing it"
                    )
                    out.append(f"input {i} dim {d} ({'+'.join(axes)}, {why})")
        return out

    def infer(mesh, arg_shapes, result_shape):
        chosen = choose_axes(mesh, [a.sharding for a in arg_shapes])
        return shardings_for(mesh, chosen, region.outputs)

    def partition(mesh, arg_shapes, result_shape):
        shardings = [a.sharding for a in arg_shapes]
        if not all(isinstance(s, NamedSharding) for s in shardings):
            warnings.warn(
                f"mirage_jax.optimize: {report.headline()}: operand shardings "
                f"{shardings} are not named shardings; the region's inputs are "
                f"gathered",
                RuntimeWarning,
                stacklevel=2,
            )
            chosen = {}
        else:
            chosen = choose_axes(mesh, shardings)
            gathered = gathered_dims(shardings, chosen)
            if gathered:
                note = (
                    f"inputs gathered along {', '.join(gathered)} (a dim the region "
                    f"reduces over must be whole on each device; so must a dim whose "
                    f"mesh axes another dim took or that they do not divide)"
                )
                report.variants.append(("sharding", note))
                warnings.warn(
                    f"mirage_jax.optimize: {report.headline()}: {note}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        run = local_kernel(mesh, chosen)

        def lower(*xs):
            return list(run(*xs))

        return (
            mesh,
            lower,
            shardings_for(mesh, chosen, region.outputs),
            tuple(shardings_for(mesh, chosen, region.inputs)),
        )

    @custom_partitioning
    def call(*xs):
        return list(kernel(*xs))

    call.def_partition(
        partition,
        infer_sharding_from_operands=infer,
        sharding_rule=rule,
        need_replication_factors=need_replication,
    )
    return call
