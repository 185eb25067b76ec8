"""superoptimize: search (or the search cache), compile the cost model's best few, time them
against XLA, check the winner in floats, and return the fastest correct one.

The original graph, run by XLA, is always timed and always the fallback, so the result is
never slower than XLA by more than timing noise and never wrong: every candidate that cannot
be compiled, run, re-verified or float-checked is dropped, and one warning lists them all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from mirage_jax.cache import store
from mirage_jax.ir import args as _args
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.runtime import backends, toolchain
from mirage_jax.runtime import compile as _compile
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt import float_check as _float_check
from mirage_jax.superopt import report, search_cache
from mirage_jax.superopt import search as _search
from mirage_jax.superopt import split as _split
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.report import XLA
from mirage_jax.superopt.search import SearchResult
from mirage_jax.superopt.verify import VerifyResult, verify_equivalent

_SEED = 0  # of the random data the candidates are timed and float-checked on
CONFIRM_BELOW = 1.15  # speedups under this are timed again before the kernel is chosen
# So are all wins over an XLA program shorter than this: at tens of microseconds a dispatch's
# jitter is the size of the gain (ntrans at 0.09 ms measured 1.2x among five contenders and
# 0.7-1.3x against XLA alone).
CONFIRM_SHORTER_THAN_S = 1e-3
CONFIRM_BUDGET_S = 2.0
# Test-only: with this set to 1, the fastest candidate that passes every correctness check is
# kept even when XLA is faster, and optimize() keeps the rewritten program whatever the
# whole-program timing says, so that tests run the generated kernels on real programs.
KEEP_KERNELS_ENV = "MIRAGE_JAX_KEEP_KERNELS"


def keep_kernels() -> bool:
    """Whether the test-only switch $MIRAGE_JAX_KEEP_KERNELS=1 is on."""
    return os.environ.get(KEEP_KERNELS_ENV) == "1"


class Superoptimized:
    """The chosen graph as a function of jax arrays (one per input of the original graph, in
    order) returning a tuple with one array per output, like mj.compile's; it runs jitted.

    graph: the chosen KernelGraph (the original one when XLA won).
    source: the generated code of its kernels; "" when it runs on XLA alone.
    timings: median seconds per call by candidate hash, and "xla" for the original.
    speedup: the original's time over the chosen one's (1.0 when XLA won).
    """

    def __init__(
        self,
        graph: KernelGraph,
        fn: Callable[..., tuple[jax.Array, ...]],
        source: str,
        timings: dict[str, float],
        speedup: float,
        report_text: str,
    ):
        self.graph = graph
        self.source = source
        self.timings = timings
        self.speedup = speedup
        self._fn = fn
        self._report = report_text

    def __call__(self, *args: Any) -> tuple[jax.Array, ...]:
        return self._fn(*args)

    def report(self) -> str:
        """What was searched and found, how the choice was verified, and the timings."""
        return self._report

    def __repr__(self) -> str:
        return f"<Superoptimized {self.graph.label}: {self.speedup:.2f}x vs XLA>"


def superoptimize(
    kg: KernelGraph,
    config: SearchConfig | None = None,
    backend: str = "cpu",
    cache_dir: str | os.PathLike | None = None,
    top_k: int = 4,
    progress: bool = True,
) -> Superoptimized:
    """The fastest verified equivalent of `kg` found by the search, as a callable.

    config: the search's (default SearchConfig()). cache_dir: the cache root for search
    results and kernels (default $MIRAGE_JAX_CACHE, else ~/.cache/mirage_jax); a warm cache
    does no search and no compilation. top_k: how many of the cost model's best candidates
    are compiled and timed; the original is timed (by XLA) whether or not it is among them.
    progress: show the search's progress and log each stage.
    """
    if not isinstance(kg, KernelGraph):
        raise TypeError(
            f"superoptimize: argument 'kg' must be a mirage_jax KernelGraph, "
            f"got {type(kg).__name__}"
        )
    if config is None:
        config = SearchConfig()
    elif not isinstance(config, SearchConfig):
        raise TypeError(
            f"superoptimize: argument 'config' must be a mirage_jax SearchConfig, "
            f"got {type(config).__name__}"
        )
    backends.backend_named(backend, "superoptimize")
    top_k = _args.integer(top_k, "superoptimize", "top_k")
    if top_k < 1:
        raise ValueError(f"superoptimize: argument 'top_k' must be >= 1, got {top_k}")
    if not isinstance(progress, bool):
        raise TypeError(
            f"superoptimize: argument 'progress' must be a bool, got {type(progress).__name__}"
        )
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(
            f"superoptimize: argument 'cache_dir' must be a path, got {type(cache_dir).__name__}"
        )
    device = None  # the default device
    if backend == "cuda":
        device, config = _cuda_setup(config)
    root = store.using_cache_root(cache_dir) if cache_dir is not None else contextlib.nullcontext()
    with root:
        return _Run(kg, config, backend, top_k, progress, device).choose()


def _cuda_setup(config: SearchConfig) -> tuple[jax.Device, SearchConfig]:
    """(the GPU the candidates and XLA are timed on, the config): a config left at the CPU
    target ranks for the visible GPU's class instead (H100-class for compute capability 9.x,
    else A100-class). RuntimeError when no GPU is visible."""
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError as e:
        raise RuntimeError(
            f"superoptimize: backend 'cuda' times candidates on a GPU, and none "
            f"is visible to jax ({e})"
        ) from None
    if config.target == "cpu":
        major = str(getattr(gpu, "compute_capability", "8.0")).split(".")[0]
        config = dataclasses.replace(config, target="h100" if major == "9" else "a100")
    return gpu, config


def _error_head(e: BaseException) -> str:
    """The first lines of an error: enough to name it, short enough for a warning."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    head = " | ".join(lines[:3]) or "(no message)"
    return f"{type(e).__name__}: {head[:400]}"


@dataclasses.dataclass(frozen=True)
class _Runnable:
    """A candidate compiled and run once: its jitted function, its outputs on the timing
    inputs, and the generated source it was compiled from."""

    graph: KernelGraph
    fn: Callable[..., Any]
    outputs: tuple[jax.Array, ...]
    source: str


class _Run:
    """One superoptimize call; its fields are what the report tells."""

    def __init__(
        self,
        kg: KernelGraph,
        config: SearchConfig,
        backend: str,
        top_k: int,
        progress: bool,
        device: jax.Device | None = None,
    ):
        self.kg, self.config, self.backend = kg, config, backend
        self.device = device  # where inputs live, so jit runs everything there
        self.top_k, self.progress = top_k, progress
        self.dropped: list[tuple[str, str]] = []  # (candidate hash, why)
        self.search_note = ""
        self.result: SearchResult | None = None
        self.costs: dict[str, float] = {}  # the cost model's estimate of each timed candidate
        self.timings: dict[str, float] = {}
        self.rounds = 0
        self.verification: VerifyResult | None = None  # of the chosen candidate
        self.float_check: _float_check.FloatCheck | None = None  # of the chosen candidate
        self.adversarial = ""  # how many adversarial patterns ran, and their time
        self.confirmation = ""  # the second timing of a narrow winner, when one ran

    def _log(self, message: str, *args: object) -> None:
        if self.progress:
            logging.info("superoptimize: " + message, *args)

    # -- search ------------------------------------------------------------------------

    def _search(self) -> SearchResult | None:
        def run() -> SearchResult:
            return _search.search(self.kg, self.config, progress=self.progress)

        try:
            try:
                result, hit = search_cache.cached_search(self.kg, self.config, self.backend, run)
            except OSError as e:
                warnings.warn(
                    f"mirage_jax: the search cache is unusable ({e}); searching without it",
                    RuntimeWarning,
                    stacklevel=4,
                )
                result, hit = run(), False
        except Exception as e:
            self.search_note = f"the search failed ({_error_head(e)})"
            return None
        self.search_note = (
            "loaded from the search cache (no search run)" if hit else f"searched: {result.stats}"
        )
        if result.reason:
            self.search_note += f"; reason: {result.reason}"
        return result

    def _spliced_tails(self) -> list:
        """When the whole program fused nothing: its tail from the first matmul of computed
        values on, searched as a program of its own (mirage_jax/superopt/split.py), each fused tail
        candidate spliced back behind the untouched prefix. Cost None: the model ranked the
        tail, not the whole."""
        split = _split.split_before_first_computed_matmul(self.kg)
        if split is None:
            return []

        def run() -> SearchResult:
            return _search.search(split.tail, self.config, progress=self.progress)

        where = f"the tail from t{split.cut_tensor} on"
        try:
            result, hit = search_cache.cached_search(split.tail, self.config, self.backend, run)
        except Exception as e:
            self.search_note += f"; {where} could not be searched ({_error_head(e)})"
            return []
        how = "loaded from the search cache" if hit else f"searched: {result.stats}"
        self.search_note += (
            f"; nothing fused the whole program, so {where} was searched on its own ({how})"
        )
        tails = [c for c in result.candidates if _fuses(c)][: self.top_k]
        return [(_split.splice(split, c), None) for c in tails]

    # -- compile, run once -------------------------------------------------------------

    def _compiled(self, graph: KernelGraph, name: str, inputs: list[jax.Array]) -> _Runnable | None:
        """The candidate compiled and run once on `inputs`, or None when that failed
        (recorded)."""
        stage = "compilation"
        try:
            built = _compile.build(graph, self.backend, "superoptimize")
            fn = jax.jit(built.fn)
            stage = "first run"
            outputs = jax.block_until_ready(fn(*inputs))
        except Exception as e:
            self.dropped.append((name, f"{stage} failed: {_error_head(e)}"))
            return None
        return _Runnable(graph, fn, outputs, built.source)

    # -- the whole run ---------------------------------------------------------------

    def choose(self) -> Superoptimized:
        original = self.kg.hash()
        self.result = self._search()
        contenders = []
        if self.result is not None:
            ranked = list(zip(self.result.candidates, self.result.costs))[: self.top_k]
            contenders = [(c, cost) for c, cost in ranked if c.hash() != original]
            if not any(_fuses(c) for c, _ in contenders):
                contenders += self._spliced_tails()
        self.costs = {c.hash(): cost for c, cost in contenders if cost is not None}

        rng = np.random.default_rng(_SEED)
        inputs = [
            jax.device_put(jnp.asarray(rng.standard_normal(t.shape), dtype=t.dtype), self.device)
            for t in self.kg.inputs
        ]
        # The original is compiled outside the try: it is the fallback, so its failure
        # (a user's customized op that does not compile) is the caller's error to see.
        xla_fn: Callable[..., Any] = jax.jit(_compile.compile(self.kg, self.backend))
        want = jax.block_until_ready(xla_fn(*inputs))

        if len(contenders) > 1:
            self._log("compiling %d candidates in parallel", len(contenders))
            _compile.prebuild([graph for graph, _ in contenders], self.backend)
        runnable: dict[str, _Runnable] = {}
        for i, (graph, _) in enumerate(contenders):
            name = graph.hash()
            self._log("compiling candidate %d/%d (%s)", i + 1, len(contenders), name)
            compiled = self._compiled(graph, name, inputs)
            if compiled is not None:
                runnable[name] = compiled

        self._log("timing %d candidates and XLA", len(runnable))
        functions: dict[str, Callable[..., Any]] = {XLA: xla_fn}
        functions.update({name: r.fn for name, r in runnable.items()})
        self.timings, self.rounds = _profile.median_times(functions, inputs)

        chosen, fn, source = self.kg, xla_fn, ""
        input_dtypes = [t.dtype for t in self.kg.inputs]
        # On a GPU at jax's default matmul precision, XLA's float32 dots (the reference) and
        # the kernels' run on TF32 tensor cores: the check allows TF32's rounding.
        tf32 = False
        if self.backend == "cuda":
            tf32 = toolchain.tf32_allowed()
        forced = keep_kernels()
        adversarial: _float_check.AdversarialSuite | None = None
        for name in sorted(runnable, key=self.timings.__getitem__):
            if self.timings[name] >= self.timings[XLA] and not forced:
                break
            graph, candidate_fn, outputs = (
                runnable[name].graph,
                runnable[name].fn,
                runnable[name].outputs,
            )
            # Trials independent of the search's own (another seed): a second, fresh proof, which
            # also guards against a cache entry edited behind its checksum's back.
            verdict = verify_equivalent(self.kg, graph, seed=(self.config.seed + 1) % 2**64)
            if not verdict:
                self.dropped.append((name, f"the verifier rejects it: {verdict.reason}"))
                continue
            check = _float_check.check_outputs(outputs, want, input_dtypes, tf32=tf32)
            if not check:
                self.dropped.append((name, f"float check failed: {check.detail}"))
                continue
            if adversarial is None:
                adversarial = _float_check.AdversarialSuite(
                    self.kg, xla_fn, inputs, self.device, tf32
                )
            stressed, pattern = adversarial.check(candidate_fn)
            if not stressed:
                self.dropped.append(
                    (name, f"adversarial float check '{pattern}' failed: {stressed.detail}")
                )
                continue
            if not forced and not self._confirm_faster(name, candidate_fn, xla_fn, inputs):
                self.dropped.append(
                    (name, f"slower than XLA when timed again on its own ({self.confirmation})")
                )
                break
            chosen, fn, source = graph, candidate_fn, runnable[name].source
            self.verification, self.float_check = verdict, check
            break
        if adversarial is not None:
            self.adversarial = (
                f"{len(adversarial.patterns)} patterns, {adversarial.seconds:.2f} s in all"
            )

        self._warn_dropped(chosen)
        chosen_time = self.timings[XLA] if chosen is self.kg else self.timings[chosen.hash()]
        speedup = self.timings[XLA] / chosen_time if chosen_time > 0 else 1.0
        return Superoptimized(
            chosen, fn, source, dict(self.timings), speedup, report.text(self, chosen, speedup)
        )

    def _confirm_faster(
        self,
        name: str,
        candidate_fn: Callable[..., Any],
        xla_fn: Callable[..., Any],
        inputs: list[jax.Array],
    ) -> bool:
        """A winner by less than CONFIRM_BELOW, or over an XLA time under
        CONFIRM_SHORTER_THAN_S, is timed again against XLA alone, for longer: with four
        contenders and a one-second budget, one noisy phase of the machine can make a slower
        kernel look a few percent faster. The longer run's medians replace the first."""
        first = self.timings[XLA] / self.timings[name]
        if first >= CONFIRM_BELOW and self.timings[XLA] >= CONFIRM_SHORTER_THAN_S:
            return True
        again, rounds = _profile.median_times(
            {XLA: xla_fn, name: candidate_fn}, inputs, budget_s=CONFIRM_BUDGET_S
        )
        self.timings.update(again)
        self.confirmation = (
            f"{first:.2f}x in the first timing, "
            f"{again[XLA] / again[name]:.2f}x over {rounds} more rounds"
        )
        return again[name] < again[XLA]

    def _warn_dropped(self, chosen: KernelGraph) -> None:
        notes = [self.search_note]
        if self.result is not None:
            notes = [f"candidate {name} dropped: {why}" for name, why in self.dropped]
            if not self.result.candidates:
                notes.append(f"the search found no candidate ({self.result.reason})")
        if not notes:
            return
        outcome = (
            f"running {report.original(self.kg)}"
            if chosen is self.kg
            else f"using candidate {chosen.hash()}"
        )
        warnings.warn(
            f"mirage_jax.superoptimize({self.kg.label}): {'; '.join(notes)}; {outcome}",
            RuntimeWarning,
            stacklevel=4,
        )


def _fuses(graph: KernelGraph) -> bool:
    return any(op.kind == "customized" for op in graph.ops)
