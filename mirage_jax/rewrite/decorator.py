"""`@mirage_jax.optimize`: specialize a function per input signature, run
its fusible regions as superoptimized kernels and everything else as plain JAX.

Per signature (pytree structure, shapes, dtypes, static arguments) the function is traced
once, flattened, partitioned into regions (mirage_jax.frontend), and each region becomes a
KernelGraph that `superoptimize` searches (or loads from the cache), compiles, times against
XLA and checks. A region whose winner is XLA, or that fails at any step, runs as the
original jax code, with one warning naming the region and the reason (never wrong, never
stuck). The rewritten program runs only when it also beats jax.jit of the whole function.

Calls go through one jax.jit per wrapped function: jax does the per-call work (signature,
cache, argument errors) and specialization happens inside its trace, once per signature,
so later calls cost what a jitted call costs. Each kernel region is transparent to
jax.grad, jax.vmap and sharding (mirage_jax/rewrite/region.py); custom_jvp/custom_vjp calls
keep their rules (mirage_jax/frontend/flat.py, CustomCall).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import numbers
import os
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import jax

from mirage_jax.frontend.flat import CustomCall, FlatProgram, Node, Var, read_value, run_nodes
from mirage_jax.frontend.region import Region
from mirage_jax.rewrite import budget, untraced, whole_program
from mirage_jax.rewrite.background import Background, describe_signature
from mirage_jax.rewrite.control_flow import (
    Partitions,
    budget_shares,
    partition_of,
    rewrite_control_flow,
)
from mirage_jax.rewrite.explain import RegionReport, left_out
from mirage_jax.rewrite.explain import explain as _explain
from mirage_jax.rewrite.progress import FunctionProgress
from mirage_jax.rewrite.region import Outcome, Pending, RegionKernel, Settings, finish, prepare
from mirage_jax.rewrite.signature import Signature as _Signature
from mirage_jax.rewrite.transparent import region_function
from mirage_jax.runtime import cold_inputs
from mirage_jax.superopt import config as _region_config
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.superoptimize import KEEP_KERNELS_ENV, keep_kernels

# Without a config each region gets limits that suit it (mirage_jax/superopt/config.py); this
# is the one a caller that wants a single config for every region starts from.
DEFAULT_CONFIG = _region_config.MLP
BACKENDS = ("auto", "cpu", "cuda", "xla")
# The rewritten program with the kernels of regions that won by less than a clear margin too
# (rewrite/region.py Pending.marginal): a region timed alone is not the region inside the
# program, and in GPT-2's bfloat16 decode step two such kernels (1.03x and 1.15x alone) took
# the whole step from 1.07x to 2.67x over jax.jit.
WITH_MARGINAL = "rewritten with marginal kernels"
# What the rewritten program runs as one piece: a kernel region or a custom derivative call.
Unit = Region | CustomCall


@overload
def optimize(
    fun: Callable[..., Any],
    *,
    config: SearchConfig | None = None,
    backend: str = "auto",
    cache_dir: str | os.PathLike[str] | None = None,
    min_region_flops: float = 0,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
    donate_argnames: str | Sequence[str] = (),
    budget_s: float | None = None,
    verbose: bool = True,
    background: bool = False,
) -> Optimized: ...


@overload
def optimize(
    fun: None = None,
    *,
    config: SearchConfig | None = None,
    backend: str = "auto",
    cache_dir: str | os.PathLike[str] | None = None,
    min_region_flops: float = 0,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
    donate_argnames: str | Sequence[str] = (),
    budget_s: float | None = None,
    verbose: bool = True,
    background: bool = False,
) -> Callable[[Callable[..., Any]], Optimized]: ...


def optimize(
    fun: Callable[..., Any] | None = None,
    *,
    config: SearchConfig | None = None,
    backend: str = "auto",
    cache_dir: str | os.PathLike[str] | None = None,
    min_region_flops: float = 0,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate_argnums: int | Sequence[int] = (),
    donate_argnames: str | Sequence[str] = (),
    budget_s: float | None = None,
    verbose: bool = True,
    background: bool = False,
) -> Optimized | Callable[[Callable[..., Any]], Optimized]:
    """Decorator: `@optimize` or `@optimize(config=..., backend=..., ...)`.

    config: the search's SearchConfig for every region (default: per region, by
        _region_config.default_config: an MLP-like region or one with a softmax).
    backend: "auto" ("cuda" when jax's default backend is the GPU, "cpu" on the CPU, plain
      XLA elsewhere), "cpu", "cuda", or "xla" (no rewriting at all).
    cache_dir: the search and kernel cache (default $MIRAGE_JAX_CACHE, else
      ~/.cache/mirage_jax).
    min_region_flops: regions that do fewer floating-point operations run as plain JAX (no
      search, no warning; explain() reports them).
    static_argnums, static_argnames: as for jax.jit: those arguments are not traced, must be
      hashable, and each value gets its own specialization.
    donate_argnums, donate_argnames: as for jax.jit: those arguments' buffers may be reused
      for the results.
    budget_s: wall seconds the first call of a signature may spend optimizing (search,
      compilation, timing), shared among the regions by expected gain; regions that cannot
      gain are not searched (default 20: a 2-4 layer transformer's first call in about 30 s
      on 2 cores). Identical regions (every layer's) are optimized once.
    verbose: show one progress line per function (False, or $MIRAGE_JAX_QUIET=1: none).
    background: the first call of a signature runs jax.jit at once and optimizes in a
      background thread; later calls switch to the rewritten program once it is ready and
      has won (`wait()`, `status()`).
    """
    if fun is None:
        return functools.partial(
            optimize,
            config=config,
            backend=backend,
            cache_dir=cache_dir,
            min_region_flops=min_region_flops,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            donate_argnums=donate_argnums,
            donate_argnames=donate_argnames,
            budget_s=budget_s,
            verbose=verbose,
            background=background,
        )
    return Optimized(
        fun,
        config=config,
        backend=backend,
        cache_dir=cache_dir,
        min_region_flops=min_region_flops,
        static_argnums=static_argnums,
        static_argnames=static_argnames,
        donate_argnums=donate_argnums,
        donate_argnames=donate_argnames,
        budget_s=budget_s,
        verbose=verbose,
        background=background,
    )


def _as_tuple(x: Any, what: str, kind: type) -> tuple[Any, ...]:
    items = (x,) if isinstance(x, kind) else tuple(x)
    if not all(isinstance(i, kind) for i in items):
        raise TypeError(f"optimize: {what} must be {kind.__name__}s, got {x!r}")
    return items


def _infer_static(
    fun: Callable[..., Any], nums: tuple[int, ...], names: tuple[str, ...]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """As jax.jit does: a static name also marks its positional slot static, and a static
    position its name, where inspect.signature can tell."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return nums, names
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    all_nums, all_names = list(nums), list(names)
    for i, p in enumerate(positional):
        if p.name in all_names and i not in all_nums:
            all_nums.append(i)
        if (
            (i in all_nums or i - len(positional) in all_nums)
            and p.name not in all_names
            and p.kind == p.POSITIONAL_OR_KEYWORD
        ):
            all_names.append(p.name)
    return tuple(all_nums), tuple(all_names)


class _Traced:
    """What an Optimized's jax.jit runs: the specialization for the call's signature. It
    passes for the user's function (name, signature, source, repr), so that jax.jit's errors
    read as they do for jax.jit(fun)."""

    def __init__(self, opt: Optimized):
        self._opt = opt
        # Not the function's __dict__: a class's (numpy.generic's) holds descriptors that
        # would shadow jax.jit's own attributes.
        functools.update_wrapper(self, opt._fun, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt._trace(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self._opt._fun)


class Optimized:
    """The wrapped function; specializations are kept per input signature."""

    def __init__(
        self,
        fun: Callable[..., Any],
        *,
        config: SearchConfig | None = None,
        backend: str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        min_region_flops: float = 0,
        static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (),
        donate_argnums: int | Sequence[int] = (),
        donate_argnames: str | Sequence[str] = (),
        budget_s: float | None = None,
        verbose: bool = True,
        background: bool = False,
        settings: Settings | None = None,
    ):
        if not callable(fun):
            raise TypeError(f"optimize: expected a function, got {type(fun).__name__}")
        if backend not in BACKENDS:
            raise ValueError(
                f"optimize: unknown backend {backend!r}; expected 'auto', 'cpu', 'cuda' or 'xla'"
            )
        if config is not None and not isinstance(config, SearchConfig):
            raise TypeError(
                f"optimize: config must be a mirage_jax SearchConfig, got {type(config).__name__}"
            )
        if not isinstance(min_region_flops, numbers.Real) or min_region_flops < 0:
            raise ValueError(
                f"optimize: min_region_flops must be a number >= 0, got {min_region_flops!r}"
            )
        if budget_s is None:
            budget_s = budget.DEFAULT_BUDGET_S
        if (
            isinstance(budget_s, bool)
            or not isinstance(budget_s, numbers.Real)
            or not 0 < budget_s < float("inf")
        ):
            raise ValueError(
                f"optimize: budget_s must be a positive number of seconds, got {budget_s!r}"
            )
        for flag, value in (("verbose", verbose), ("background", background)):
            if not isinstance(value, bool):
                raise TypeError(f"optimize: {flag} must be a bool, got {type(value).__name__}")
        functools.update_wrapper(self, fun)
        self._budget_s: float = float(budget_s)
        self._verbose: bool = verbose
        self._fun: Callable[..., Any] = fun
        self._config: SearchConfig | None = config  # None: per region (_region_config)
        self._backend: str = backend
        self._cache_dir: str | os.PathLike[str] | None = cache_dir
        self._min_region_flops: float = float(min_region_flops)
        self._static_argnums: tuple[int, ...]
        self._static_argnames: tuple[str, ...]
        self._static_argnums, self._static_argnames = _infer_static(
            fun,
            _as_tuple(static_argnums, "static_argnums", int),
            _as_tuple(static_argnames, "static_argnames", str),
        )
        self._donate_argnums: tuple[int, ...] = _as_tuple(donate_argnums, "donate_argnums", int)
        self._donate_argnames: tuple[str, ...] = _as_tuple(donate_argnames, "donate_argnames", str)
        self._settings: Settings | None = settings
        self._specializations: dict[Hashable, _Specialization] = {}
        self._jitted: Callable[..., Any] | None = None
        self._background: Background | None = Background(self) if background else None
        # jax.jit of the function itself: it traces each signature for the frontend (so the
        # user's errors are jax.jit's, word for word) and runs it where nothing is rewritten.
        self._plain: Any = jax.jit(
            fun, static_argnums=self._static_argnums, static_argnames=self._static_argnames
        )
        # The same, donating as asked: what a call runs while nothing is rewritten yet
        # (background=True), so a donated buffer is given up as under jax.jit.
        self._plain_call: Any = (
            jax.jit(
                fun,
                static_argnums=self._static_argnums,
                static_argnames=self._static_argnames,
                donate_argnums=self._donate_argnums,
                donate_argnames=self._donate_argnames or None,
            )
            if self._donate_argnums or self._donate_argnames
            else self._plain
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._background is not None:
            return self._background.call(args, kwargs)
        return self._rewritten_jit()(*args, **kwargs)

    def _rewritten_jit(self) -> Callable[..., Any]:
        # jax.jit does the per-call work (argument checking and errors, the signature, the
        # cache of compiled programs) in C++; `_trace` runs once per signature, inside it.
        jitted = self._jitted
        if jitted is None:
            jitted = self._jitted = jax.jit(
                _Traced(self),
                static_argnums=self._static_argnums,
                static_argnames=self._static_argnames,
                donate_argnums=self._donate_argnums,
                # None, as jax.jit's default, where none are given: names need a signature,
                # which not every callable (a class, a builtin) has.
                donate_argnames=self._donate_argnames or None,
            )
        return jitted

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for background optimization of every signature called so far; True when
        all are done (at once without background=True: everything is done in the call)."""
        return True if self._background is None else self._background.wait(timeout)

    def status(self) -> dict[str, str]:
        """Per signature called so far: "optimizing" (background=True, still running as
        jax.jit), "kernels" (the rewritten program runs), "jax.jit" (nothing kept), or
        "failed: ..." (a background error; it runs as jax.jit)."""
        states = {}
        for key, spec in list(self._specializations.items()):
            kept = spec.whole_program_kept and any(r.chosen == "kernel" for r in spec.reports)
            states[describe_signature(key)] = "kernels" if kept else "jax.jit"
        if self._background is not None:
            states.update(self._background.states())
        return states

    def _trace(self, *args: Any, **kwargs: Any) -> Any:
        spec, dynamic = self._specialization(args, kwargs)
        return spec.call(dynamic)

    def __get__(self, obj: object, objtype: type | None = None) -> Any:  # decorating a method
        return self if obj is None else functools.partial(self, obj)

    def settings(self) -> Settings:
        if self._settings is None:
            return Settings(
                self._config,
                _backend(self._backend),
                self._cache_dir,
                self._min_region_flops,
                budget_s=self._budget_s,
                verbose=self._verbose,
            )
        return self._settings

    def _specialization(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[_Specialization, list[Any]]:
        sig = _Signature(self, args, kwargs)
        spec = self._specializations.get(sig.key)
        if spec is None:
            spec = self._specializations[sig.key] = _specialize(self, sig)
        return spec, sig.dynamic

    def regions(self, *args: Any, **kwargs: Any) -> list[RegionReport]:
        """The RegionReport of every region found for this signature (specializing first)."""
        return list(self._specialization(args, kwargs)[0].reports)

    def uses_kernels(self, *args: Any, **kwargs: Any) -> bool:
        """Whether this signature runs generated kernels: some region chose one, and the
        rewritten program beat jax.jit of the whole function."""
        spec = self._specialization(args, kwargs)[0]
        return spec.whole_program_kept and any(r.chosen == "kernel" for r in spec.reports)

    def explain(self, *args: Any, **kwargs: Any) -> str:
        """Prints and returns, for this signature, each region with its source lines, the
        μGraph chosen, how it was verified and the measured speedup (or why it runs as
        plain JAX)."""
        text = _explain(self._specialization(args, kwargs)[0])
        print(text)
        return text

    def explain_all(self) -> str:
        """The explanation of every specialization made so far."""
        if not self._specializations:
            return "(not specialized yet)"
        return "\n\n".join(_explain(s) for s in self._specializations.values())


@dataclass
class _Specialization:
    run: Callable[..., list[Any]]  # of the traced leaves, returning the output leaves
    out_tree: Any  # jax's PyTreeDef
    reports: list
    backend: str
    note: str = ""  # the whole-program timing, when there are kernels
    whole_program_kept: bool = True  # False: slower than jax.jit as a whole, runs as that
    left_out: list[str] = field(default_factory=list)  # explain.left_out

    def call(self, leaves: list[Any]) -> Any:
        return jax.tree_util.tree_unflatten(self.out_tree, self.run(*leaves))


def _backend(requested: str) -> str:
    if requested != "auto":
        return requested
    platform = jax.default_backend()
    return {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda"}.get(platform, "xla")


def _respecialize(fun: Callable, settings: Settings) -> Optimized:
    """`fun` optimized on its own with `settings` (a region batched under vmap)."""
    return Optimized(fun, settings=settings)


def _specialize(opt: Optimized, sig: _Signature) -> _Specialization:
    def plain(*arrays: Any) -> list[Any]:
        call_args, call_kwargs = sig.rebuild(list(arrays))
        return jax.tree_util.tree_leaves(opt._plain(*call_args, **call_kwargs))

    # The user's own errors come from jax.jit's trace, word for word (from the type: jax.jit
    # copies a wrapped class's __dict__, and numpy.generic has a `trace`).
    traced = type(opt._plain).trace(opt._plain, *sig.args, **sig.kwargs)
    out_shapes = traced.out_info

    def flat_fun(*arrays: Any) -> Any:
        call_args, call_kwargs = sig.rebuild(list(arrays))
        return opt._fun(*call_args, **call_kwargs)

    # A fresh trace for the frontend: jax.jit may hand back a jaxpr cached from an earlier
    # trace of the function, whose source locations are not this call's (explain names them).
    closed = jax.make_jaxpr(flat_fun)(*sig.avals)
    out_tree = jax.tree_util.tree_structure(out_shapes)
    settings = opt.settings()
    if settings.backend == "xla":
        return _Specialization(plain, out_tree, [], "xla")
    if not settings.cold_caches:  # a region optimized again (vmap) keeps its function's
        arrays = [*sig.avals, *(c for c in closed.consts if hasattr(c, "dtype"))]
        cold = cold_inputs.exceeds_cache(cold_inputs.nbytes(arrays))
        settings = dataclasses.replace(settings, cold_caches=cold)
    try:
        name = getattr(opt._fun, "__qualname__", None) or repr(opt._fun)
        return untraced.call(_rewrite, closed, out_shapes, sig, plain, settings, name)
    except Exception as e:  # whatever fails in mirage_jax, the function still runs as jax.jit
        name = getattr(opt._fun, "__qualname__", repr(opt._fun))
        reason = f"{type(e).__name__}: {e}"
        warnings.warn(
            f"mirage_jax.optimize: {name} runs as jax.jit, not rewritten: {reason}",
            RuntimeWarning,
            stacklevel=2,
        )
        return _Specialization(
            plain, out_tree, [], settings.backend, f"not rewritten: {reason}", False
        )


def _rewrite(
    closed: Any,
    out_shapes: Any,
    sig: _Signature,
    plain: Callable[..., list[Any]],
    settings: Settings,
    name: str = "function",
    memo: Partitions | None = None,
) -> _Specialization:
    """The specialization of a traced function: its regions' kernels in the rewritten
    program, or `plain` (the function itself) where none is kept. `memo`: the partitions
    already made while optimizing the function this one is a body of (control_flow.py)."""
    out_tree = jax.tree_util.tree_structure(out_shapes)
    memo = {} if memo is None else memo
    part = partition_of(closed, memo)
    shares = budget_shares(part, settings.budget_s, memo)
    flows = rewrite_control_flow(part.program, _rewrite, settings, name, shares, memo)
    bodies = {i: flow.rebound() for i, flow in flows.items() if flow.kept}
    own = dataclasses.replace(settings, budget_s=shares[-1] or settings.budget_s)
    progress = FunctionProgress(name, len(part.regions), own.budget_s, settings.verbose)
    outcomes, marginal = _optimize_regions(part.regions, own, progress)
    kernels, reports = {}, []
    for region in part.regions:
        kernel, report = outcomes[id(region)]
        reports.append(report)
        if kernel is not None:
            kernels[id(region)] = region_function(region, kernel, report, settings, _respecialize)
    for flow in flows.values():
        reports.extend(flow.reports)
    program = part.program
    with_marginal = dict(kernels)
    for region in part.regions:
        if id(region) in marginal:
            report = outcomes[id(region)][1]
            with_marginal[id(region)] = region_function(
                region, marginal[id(region)], report, settings, _respecialize
            )
    variants = {}
    if kernels or bodies:
        variants[whole_program.REWRITTEN] = _program(program, part.regions, kernels, bodies)
    if len(with_marginal) > len(kernels):
        variants[WITH_MARGINAL] = _program(program, part.regions, with_marginal, bodies)

    cut = left_out(part)
    for flow in flows.values():
        cut += [line for line in flow.left_out() if line not in cut]
    if not variants:  # the function itself, exactly as jax.jit would run it
        progress.close("no kernel kept: runs as jax.jit")
        return _Specialization(plain, out_tree, reports, settings.backend, left_out=cut)
    for fn in variants.values():
        _check_types(fn, out_shapes, sig.avals)
    if keep_kernels():
        chosen = whole_program.REWRITTEN if kernels or bodies else None
        note = f"whole program not timed (${KEEP_KERNELS_ENV}=1: kernels kept)"
    elif any(n.effectful for n in program.nodes):
        # Timing runs a program hundreds of times, and each run would print or call back
        # again. Its regions were timed without the effects (they stay plain JAX), so the
        # kernels that won theirs clearly run; the marginal ones do not.
        chosen = whole_program.REWRITTEN if kernels or bodies else None
        note = (
            "whole program not timed: it has side effects (prints, callbacks) that timing "
            "would repeat; it runs the kernels that clearly won their regions"
        )
    else:
        progress.stage("timing the whole program against jax.jit")
        chosen, note = whole_program.choose(variants, plain, sig.avals, closed, settings.cache_dir)
    for region, report in zip(part.regions, reports):
        if id(region) not in marginal:
            continue
        if chosen == WITH_MARGINAL:
            report.chosen = "kernel"
            report.reason += ", and the whole program runs clearly faster with it"
        else:
            report.reason += ", and the whole program was not clearly faster with it"
    used = with_marginal if chosen == WITH_MARGINAL else kernels
    for flow in flows.values():
        note += "".join(f"\n{line}" for line in flow.notes())
    progress.close(
        f"{len(used)} kernel regions, " + ("kept" if chosen else "slower as a whole: jax.jit")
    )
    return _Specialization(
        variants[chosen] if chosen else plain,
        out_tree,
        reports,
        settings.backend,
        note,
        chosen is not None,
        cut,
    )


def _program(
    program: FlatProgram,
    regions: Sequence[Region],
    kernels: dict[int, Callable[..., Any]],
    bodies: dict[int, Node] | None = None,
) -> Callable[..., list[Any]]:
    """The program with `kernels` (by region id) in place of their regions, and `bodies`'
    control-flow nodes (by node index: rewrite/control_flow.py) in place of their own."""
    bodies = bodies or {}
    kernel_regions = [r for r in regions if id(r) in kernels]
    units = _schedule(program, [*kernel_regions, *_whole_calls(program, kernel_regions)])

    def rewritten(*flat: Any) -> list[Any]:
        env = dict(program.consts)
        env.update(zip(program.invars, flat))
        for unit in units:
            if isinstance(unit, Region):
                outs = kernels[id(unit)](*[read_value(env, v) for v in unit.inputs])
                env.update(zip(unit.outputs, outs))
            elif isinstance(unit, CustomCall):
                unit.bind(env)
            else:
                run_nodes([bodies.get(unit.index, unit)], env)
        return [read_value(env, v) for v in program.outvars]

    return rewritten


def _optimize_regions(
    regions: Sequence[Region], settings: Settings, progress: FunctionProgress
) -> tuple[dict[int, Outcome], dict[int, RegionKernel]]:
    """Each region's outcome (by id), within the function's budget (rewrite/budget.py):
    every region is converted and its possible gain estimated first; then the regions worth
    searching are superoptimized in order of gain, identical ones (same graph: every layer's)
    once, each with its share of what is left of the budget. Also the kernels of regions
    whose best candidate won by less than a clear margin (by id), for the whole program to
    try."""
    spending = budget.FunctionBudget(settings.budget_s)
    outcomes: dict[int, Outcome] = {}
    marginal: dict[int, RegionKernel] = {}
    groups: dict[str, list[Pending]] = {}
    for i, region in enumerate(regions):
        progress.stage(f"estimating region {i + 1}")
        prepared = prepare(region, settings)
        if isinstance(prepared, Pending):
            groups.setdefault(prepared.rg.graph.hash(), []).append(prepared)
        else:
            outcomes[id(region)] = prepared
            progress.done += 1
    forced = keep_kernels()  # tests: every region searched with its config's own budget
    ordered = sorted(groups.values(), key=lambda g: -sum(p.gain_s for p in g))
    allotments = budget.plan(
        [sum(p.gain_s for p in g) for g in ordered],
        settings.budget_s,
        [g[0].config.time_budget_s for g in ordered],
    )
    for group, allotment in zip(ordered, allotments):
        # The plan fits the budget, so every planned group is done: cutting groups by the
        # clock would make the kept kernels depend on the machine's load. Only a run far
        # past its budget (a slow compiler, a loaded machine) leaves the rest as plain JAX,
        # to be done by a later process.
        spent = not forced and spending.overrun()
        for pending in group:
            if spent:
                outcomes[id(pending.region)] = (
                    None,
                    pending.report(
                        "xla",
                        f"not searched: the function's optimization budget "
                        f"({spending.seconds:g} s, optimize(budget_s=)) was spent",
                    ),
                )
            else:
                search_s = None if forced else allotment.search_s
                progress.stage(
                    "superoptimizing a region"
                    + (f" ({search_s:g} s of search)" if search_s is not None else "")
                )
                top_k = 4 if forced else allotment.top_k
                outcomes[id(pending.region)] = outcome = finish(pending, search_s, top_k)
                if pending.marginal is not None:
                    marginal[id(pending.region)] = pending.marginal
                progress.searches += pending is group[0]
                progress.kernels += outcome[0] is not None
            progress.done += 1
    return outcomes, marginal


def _check_types(
    rewritten: Callable[..., list[Any]], out_shapes: Any, avals: list[jax.ShapeDtypeStruct]
) -> None:
    """Raises unless the rewritten program traces to the function's own output types."""
    got = jax.eval_shape(rewritten, *avals)
    want = jax.tree_util.tree_leaves(out_shapes)
    types = [(tuple(x.shape), x.dtype) for x in got], [(tuple(x.shape), x.dtype) for x in want]
    if types[0] != types[1]:
        raise RuntimeError(
            f"internal error: the rewritten program returns {types[0]}, the function {types[1]}"
        )


def _whole_calls(program: FlatProgram, kernel_regions: list[Region]) -> list[CustomCall]:
    """The outermost custom_jvp/custom_vjp calls none of whose nodes runs in a kernel: they
    run as the original calls, so jax differentiates them with their own rules."""
    in_kernel = {n.index for r in kernel_regions for n in r.nodes}
    chosen: list[CustomCall] = []
    ids: set[int] = set()
    for call in sorted(program.custom_calls, key=lambda c: (c.nodes[0].index, -len(c.nodes))):
        if call.parent in ids or any(n.index in in_kernel for n in call.nodes):
            continue
        chosen.append(call)
        ids.add(call.index)
    # a call inside a chosen one is covered by it (its parent chain reaches a chosen call)
    by_index = {c.index: c for c in program.custom_calls}

    def covered(c: CustomCall) -> bool:
        p = c.parent
        while p is not None:
            if p in ids:
                return True
            p = by_index[p].parent
        return False

    return [c for c in chosen if not covered(c)]


def _nodes_of(unit: Unit | Node) -> list[Node]:
    return [unit] if isinstance(unit, Node) else unit.nodes


def _schedule(program: FlatProgram, regions: Sequence[Unit]) -> list[Unit | Node]:
    """Nodes and whole units (kernel regions, custom derivative calls: anything with
    `.nodes`) in an order that respects every data dependence, and the program's order of
    side effects (prints, callbacks). Each unit is convex, so contracting it to one leaves
    the graph acyclic."""
    unit_of: dict[int, Unit] = {}
    for region in regions:
        for node in region.nodes:
            unit_of[node.index] = region
    producer: dict[Var, Unit | Node] = {}
    for node in program.nodes:
        for v in node.outvars:
            producer[v] = unit_of.get(node.index, node)
    units = list({id(u): u for u in (unit_of.get(n.index, n) for n in program.nodes)}.values())
    deps: dict[int, set[int]] = {id(u): set() for u in units}
    for node in program.nodes:
        unit = unit_of.get(node.index, node)
        for operand in node.invars:
            p = producer.get(operand) if isinstance(operand, Var) else None
            if p is not None and p is not unit:
                deps[id(unit)].add(id(p))
    effectful = [u for u in units if any(n.effectful for n in _nodes_of(u))]
    for before, after in itertools.pairwise(effectful):  # units are in program order
        deps[id(after)].add(id(before))
    order: list[Unit | Node] = []
    done: set[int] = set()
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
