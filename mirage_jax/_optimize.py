"""`@mirage_jax.optimize` (DESIGN.md §5.1): specialize a function per input signature, run
its fusible regions as superoptimized kernels and everything else as plain JAX.

Per signature (pytree structure, shapes, dtypes) the function is traced once, flattened,
partitioned into regions (mirage_jax.frontend), and each region becomes a KernelGraph that
`superoptimize` searches (or loads from the cache), compiles, times against XLA and checks.
A region whose winner is XLA, or that fails at any step, runs as the original jax code, with
one warning naming the region and the reason (never wrong, never stuck). The rewritten
program is evaluated inside `jax.jit`, so later calls with the same signature cost what a
jitted call costs.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from mirage_jax import _search
from mirage_jax._superoptimize import superoptimize
from mirage_jax.frontend.partition import Region, Var, partition, read_value, run_nodes
from mirage_jax.frontend import region_to_graph, RegionNotSupported

# Regions are small programs: one graph-defined op of up to five block ops covers the fused
# forms of DESIGN §9 that the search finds in seconds.
DEFAULT_CONFIG = _search.SearchConfig(max_kernel_ops=1, max_block_ops=5, time_budget_s=60)


@dataclass
class RegionReport:
    """What happened to one region: `chosen` is "kernel" or "xla"; `reason` says why."""

    sources: list
    primitives: list
    chosen: str
    reason: str
    report: str  # superoptimize's report, "" when it did not run

    def __str__(self):
        where = ", ".join(s for s in self.sources if s) or "(no source info)"
        text = f"region at {where}: {self.chosen} ({self.reason})\n  primitives: " \
               f"{' '.join(self.primitives)}"
        if self.report:
            text += "\n" + "\n".join("  " + line for line in self.report.splitlines())
        return text


def optimize(fun: Callable | None = None, *, config=None, backend: str = "auto",
             cache_dir=None):
    """Decorator: `@optimize` or `@optimize(config=..., backend=..., cache_dir=...)`.

    backend: "auto" (the CPU kernels when jax runs on the CPU, else plain XLA until the CUDA
    backend lands), "cpu", or "xla" (no rewriting at all).
    """
    if fun is None:
        return functools.partial(optimize, config=config, backend=backend, cache_dir=cache_dir)
    if backend not in ("auto", "cpu", "xla", "cuda"):
        raise ValueError(f"optimize: unknown backend {backend!r}; expected 'auto', 'cpu', "
                         f"'cuda' or 'xla'")
    return Optimized(fun, config or DEFAULT_CONFIG, backend, cache_dir)


class Optimized:
    """The wrapped function; specializations are kept per input signature."""

    def __init__(self, fun, config, backend, cache_dir):
        functools.update_wrapper(self, fun)
        self._fun, self._config, self._backend, self._cache_dir = fun, config, backend, cache_dir
        self._specializations: dict = {}

    def __call__(self, *args, **kwargs):
        return self._specialization(args, kwargs).call(_array_leaves(args, kwargs))

    def _specialization(self, args, kwargs) -> "_Specialization":
        key = _signature(args, kwargs)
        spec = self._specializations.get(key)
        if spec is None:
            spec = self._specializations[key] = _specialize(self, args, kwargs)
        return spec

    def explain(self, *args, **kwargs) -> str:
        """The regions found for this signature, what was chosen for each, and why."""
        reports = self._specialization(args, kwargs).reports
        if not reports:
            return "no region with a matmul or a reduction: the function runs as plain JAX"
        return "\n\n".join(str(r) for r in reports)


@dataclass
class _Specialization:
    jitted: Callable
    out_tree: object
    reports: list

    def call(self, leaves):
        import jax

        return jax.tree_util.tree_unflatten(self.out_tree, self.jitted(*leaves))


def _backend(requested: str) -> str:
    import jax

    if requested != "auto":
        return requested
    return "cpu" if jax.default_backend() == "cpu" else "xla"


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _array_leaves(args, kwargs) -> list:
    import jax

    return [x for x in jax.tree_util.tree_leaves((args, kwargs)) if _is_array(x)]


def _signature(args, kwargs):
    """Like jax.jit's cache key: the pytree structure, each array's shape and dtype, and the
    value of every other leaf (Python scalars, strings), which is treated as static."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    described = []
    for x in leaves:
        if _is_array(x):
            described.append(("array", tuple(x.shape), str(x.dtype)))
        else:
            try:
                hash(x)
            except TypeError:
                raise TypeError(f"optimize: argument leaf {x!r} of type {type(x).__name__} is "
                                f"neither an array nor hashable (static values must be "
                                f"hashable, as with jax.jit's static_argnums)") from None
            described.append(("static", type(x).__name__, x))
    return tree, tuple(described)


def _specialize(opt: Optimized, args, kwargs) -> _Specialization:
    import jax

    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    is_array = [_is_array(x) for x in leaves]

    def flat_fun(*arrays):
        it = iter(arrays)
        full = [next(it) if a else x for x, a in zip(leaves, is_array)]
        call_args, call_kwargs = jax.tree_util.tree_unflatten(tree, full)
        return opt._fun(*call_args, **call_kwargs)

    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x, a in zip(leaves, is_array) if a]
    closed, out_shapes = jax.make_jaxpr(flat_fun, return_shape=True)(*specs)
    out_tree = jax.tree_util.tree_structure(out_shapes)
    backend = _backend(opt._backend)
    plain = jax.jit(lambda *arrays: jax.tree_util.tree_leaves(flat_fun(*arrays)))
    if backend == "xla":
        return _Specialization(plain, out_tree, [])
    if backend == "cuda":
        warnings.warn("mirage_jax.optimize: the CUDA backend is not implemented yet; running "
                      "plain XLA", RuntimeWarning, stacklevel=3)
        return _Specialization(plain, out_tree, [])

    part = partition(closed)
    kernels, reports = {}, []
    for region in part.regions:
        run, report = _region_kernel(region, opt, backend)
        reports.append(report)
        if run is not None:
            kernels[id(region)] = run
    program = part.program
    units = _schedule(program, [r for r in part.regions if id(r) in kernels])

    def rewritten(*flat):
        env = dict(program.consts)
        env.update(zip(program.invars, flat))
        for unit in units:
            if isinstance(unit, Region):
                outs = kernels[id(unit)](*[read_value(env, v) for v in unit.inputs])
                env.update(zip(unit.outputs, outs))
            else:
                run_nodes([unit], env)
        return [read_value(env, v) for v in program.outvars]

    return _Specialization(jax.jit(rewritten), out_tree, reports)


def _region_kernel(region, opt: Optimized, backend: str):
    """(a function of the region's input values returning its outputs, the report), or
    (None, the report) when the region stays plain JAX."""
    import jax.numpy as jnp

    def report(chosen, reason, text=""):
        return RegionReport(list(dict.fromkeys(region.sources)), region.primitives, chosen,
                            reason, text)

    try:
        rg = region_to_graph(region)
    except RegionNotSupported as e:
        return None, _fallback(report("xla", f"not expressible as a μGraph: {e.reason}"))
    try:
        fast = superoptimize(rg.graph, opt._config, backend=backend, cache_dir=opt._cache_dir,
                             progress=False)
    except Exception as e:  # noqa: BLE001 (any failure runs the region as plain JAX, named)
        return None, _fallback(report("xla", f"superoptimize failed: {type(e).__name__}: {e}"))
    if fast.graph is rg.graph or not any(op.kind == "customized" for op in fast.graph.ops):
        return None, report("xla", "no candidate beat XLA", fast.report())

    def run(*values):
        outs = fast(*rg.prepare_inputs(values, xp=jnp))
        return rg.finish_outputs(outs, xp=jnp)

    return run, report("kernel", f"{fast.speedup:.2f}x over XLA in its own timing",
                       fast.report())


def _fallback(r: RegionReport) -> RegionReport:
    warnings.warn(f"mirage_jax.optimize: {str(r).splitlines()[0]}", RuntimeWarning,
                  stacklevel=5)
    return r


def _schedule(program, regions) -> list:
    """Nodes and whole regions in an order that respects every data dependence. Regions are
    convex, so contracting each to one unit leaves the graph acyclic."""
    unit_of = {}
    for region in regions:
        for node in region.nodes:
            unit_of[node.index] = region
    producer = {}
    for node in program.nodes:
        for v in node.outvars:
            producer[v] = unit_of.get(node.index, node)
    units = list({id(u): u for u in (unit_of.get(n.index, n) for n in program.nodes)}.values())
    deps = {id(u): set() for u in units}
    for node in program.nodes:
        unit = unit_of.get(node.index, node)
        for v in node.invars:
            p = producer.get(v) if isinstance(v, Var) else None
            if p is not None and p is not unit:
                deps[id(unit)].add(id(p))
    order, done = [], set()
    pending = list(units)
    while pending:
        ready = [u for u in pending if deps[id(u)] <= done]
        if not ready:
            raise RuntimeError("mirage_jax.optimize: internal error: regions form a cycle")
        for u in ready:
            order.append(u)
            done.add(id(u))
        pending = [u for u in pending if id(u) not in done]
    return order
