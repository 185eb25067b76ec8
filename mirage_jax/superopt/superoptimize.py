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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from mirage_jax.cache import store
from mirage_jax.ir import args as _args
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.runtime import backends, toolchain
from mirage_jax.runtime import cold_inputs as _cold_inputs
from mirage_jax.runtime import compile as _compile
from mirage_jax.runtime import decision as _decision
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt import contenders as _contenders
from mirage_jax.superopt import float_check as _float_check
from mirage_jax.superopt import report, search_cache, verdict_cache
from mirage_jax.superopt import search as _search
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.report import XLA
from mirage_jax.superopt.search import SearchResult
from mirage_jax.superopt.verify import VerifyResult, verify_equivalent

_SEED = 0  # of the random data the candidates are timed and float-checked on
_BUILD_FAILURES = ("compilation failed", "first run failed")  # as _compiled records them
# Candidates whose win over XLA is put to the paired decision, fastest first: the first
# timing's order is noise where candidates nearly tie, and stopping at the first loser lost a
# Llama decode step's down projection (its first 0.93x XLA over 600 rounds, the next one
# 1.34x in the first timing, never decided).
DECISIONS = 2
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
    costs: the cost model's estimate in seconds of each timed candidate, by hash, when this
    call searched and timed ({} when it followed a stored verdict); with `timings` it says
    how well the model ranked them (benchmarks/ranking.py).
    runner_up: when XLA was kept, the fastest candidate, verified and float-checked as a
    chosen one is, its `speedup` its time ratio over XLA's. None otherwise.
    marginal: the runner-up when it still measured faster than XLA, only not by a clear
    MIN_SPEEDUP (runtime/decision.py): a whole program may try it (mirage_jax/rewrite/
    whole_program.py), since a region's gain timed alone is not its gain inside the program.
    A runner-up that lost may still beat a region as its model lays it out, when that
    differs from the graph's layout (mirage_jax/rewrite/boundary.py).
    """

    def __init__(
        self,
        graph: KernelGraph,
        fn: Callable[..., tuple[jax.Array, ...]],
        source: str,
        timings: dict[str, float],
        speedup: float,
        report_text: str,
        costs: dict[str, float] | None = None,
    ):
        self.graph = graph
        self.costs = dict(costs or {})
        self.source = source
        self.timings = timings
        self.speedup = speedup
        self._fn = fn
        self._report = report_text
        self.runner_up: Superoptimized | None = None

    def __call__(self, *args: Any) -> tuple[jax.Array, ...]:
        return self._fn(*args)

    def call_reshaped(
        self, args: Sequence[Any], out_shapes: Sequence[Sequence[int]]
    ) -> tuple[jax.Array, ...]:
        """As a call, with each input any reshape of the graph's, and each output returned
        in `out_shapes` (reshapes of the graph's): the kernels read and write the arrays as
        they are, where a reshape beside them can cost XLA a copy."""
        shapes = tuple(tuple(int(d) for d in s) for s in out_shapes)
        return self._fn(*args, out_shapes=shapes, reshaped_inputs=True)

    @property
    def marginal(self) -> Superoptimized | None:
        r = self.runner_up
        return r if r is not None and r.speedup > 1.0 else None

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
    cold_caches: bool = False,
) -> Superoptimized:
    """The fastest verified equivalent of `kg` found by the search, as a callable.

    config: the search's (default SearchConfig()). cache_dir: the cache root for search
    results and kernels (default $MIRAGE_JAX_CACHE, else ~/.cache/mirage_jax); a warm cache
    does no search and no compilation. top_k: how many of the cost model's best candidates
    are compiled and timed, besides any whose cost ties the best's and whose kernels build
    alongside (mirage_jax/superopt/contenders.py); the original is timed (by XLA) whether or
    not it is among them.
    progress: show the search's progress and log each stage.
    cold_caches: time the candidates and XLA with their inputs evicted from the CPU caches
    (mirage_jax/runtime/cold_inputs.py), as a graph runs inside a program whose working set
    exceeds them; mirage_jax.optimize sets it for such functions.
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
    if not isinstance(cold_caches, bool):
        raise TypeError(
            f"superoptimize: argument 'cold_caches' must be a bool, "
            f"got {type(cold_caches).__name__}"
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
        return _Run(kg, config, backend, top_k, progress, device, cold_caches).choose()


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
        cold_caches: bool = False,
    ):
        self.kg, self.config, self.backend = kg, config, backend
        self.cold_caches = cold_caches and backend == "cpu"  # a GPU's inputs are not cached
        self.arg_sets: list[list[jax.Array]] | None = None  # the rotation of cold timing
        self.device = device  # where inputs live, so jit runs everything there
        self.top_k, self.progress = top_k, progress
        self.dropped: list[tuple[str, str]] = []  # (candidate hash, why)
        self.generated: dict[str, _compile.Generated] = {}  # prebuilt code by graph hash
        self.search_note = ""
        self.result: SearchResult | None = None
        self.costs: dict[str, float] = {}  # the cost model's estimate of each timed candidate
        self.tied = 0  # candidates timed past top_k: the model could not tell them apart
        # Whether a candidate generating its matmuls was timed beside contenders that all
        # widen a 16-bit operand in XLA (contenders.generated_alternative).
        self.generated_alternative = False
        self.timings: dict[str, float] = {}
        self.rounds = 0
        self.verification: VerifyResult | None = None  # of the chosen candidate
        self.float_check: _float_check.FloatCheck | None = None  # of the chosen candidate
        self.adversarial = ""  # how many adversarial patterns ran, and their time
        self.decision: _decision.Decision | None = None  # of the fastest checked candidate
        # The fastest checked candidate, when XLA is kept (a marginal win, or a loss).
        self.runner_up: (
            tuple[_Runnable, _decision.Decision, VerifyResult, _float_check.FloatCheck] | None
        ) = None
        self.loaded: dict | None = None  # the stored verdict this run followed, if any

    def _rotation(self) -> dict[str, Any]:
        """median_times' arguments for cold caches (none when timing warm)."""
        return {"arg_sets": self.arg_sets} if self.arg_sets else {}

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
        if result.parts:
            self.search_note += f"; {result.parts}"
        return result

    # -- compile, run once -------------------------------------------------------------

    def _compiled(self, graph: KernelGraph, name: str, inputs: list[jax.Array]) -> _Runnable | None:
        """The candidate compiled and run once on `inputs`, or None when that failed
        (recorded)."""
        stage = "compilation"
        try:
            built = _compile.build(
                graph, self.backend, "superoptimize", self.generated.get(graph.hash())
            )
            fn = _compile.jit(built.fn)
            stage = "first run"
            outputs = jax.block_until_ready(fn(*inputs))
        except Exception as e:
            self.dropped.append((name, f"{stage} failed: {_error_head(e)}"))
            return None
        return _Runnable(graph, fn, outputs, built.source)

    # -- the whole run ---------------------------------------------------------------

    def choose(self) -> Superoptimized:
        if keep_kernels():  # forced: nothing is decided, so nothing is stored or followed
            return self._measure(None)
        key = verdict_cache.region_key(
            self.kg, self.config, self.backend, self.top_k, self.cold_caches
        )
        with verdict_cache.measuring(key):
            stored = verdict_cache.load(key)
            if stored is not None:
                try:
                    followed = self._follow(key, stored)
                except Exception as e:  # a field of the wrong type, ...: measure again
                    verdict_cache.reject(key, f"it does not read ({_error_head(e)})")
                    followed = None
                if followed is not None:
                    return followed
                self.loaded, self.verification, self.timings = None, None, {}
            return self._measure(key)

    def _measure(self, key: str | None) -> Superoptimized:
        """Search, compile, time, check and decide; the verdict is stored under `key` (None:
        the test-only switch forces kernels, and nothing is stored)."""
        forced = key is None
        original = self.kg.hash()
        self.result = self._search()
        contenders: list[tuple[KernelGraph, float | None]] = []
        if self.result is not None:
            # The original is timed under XLA whatever its rank, so the top_k slots go to the
            # best others: a model that ranks the original first (it did for every bfloat16
            # region of GPT-2's decode step, whose kernels ran it 3.6x faster) would
            # otherwise leave a top_k=1 region with nothing to time.
            code_key = backends.backend_named(self.backend, "superoptimize").code_key
            ranked = _contenders.distinct_code(
                list(zip(self.result.candidates, self.result.costs)),
                lambda graph: code_key(graph._core),
            )
            slots = _compile.build_slots()
            contenders, self.tied = _contenders.choose(ranked, original, self.top_k, slots)
            alternative = _contenders.generated_alternative(ranked, original, contenders, slots)
            if alternative is not None:
                contenders.append(alternative)
                self.generated_alternative = True
        self.costs = {c.hash(): cost for c, cost in contenders if cost is not None}

        rng = np.random.default_rng(_SEED)
        inputs = [
            jax.device_put(jnp.asarray(rng.standard_normal(t.shape), dtype=t.dtype), self.device)
            for t in self.kg.inputs
        ]
        # The original is compiled outside the try: it is the fallback, so its failure
        # (a user's customized op that does not compile) is the caller's error to see.
        xla_fn: Callable[..., Any] = _compile.jit(_compile.compile(self.kg, self.backend))
        want = jax.block_until_ready(xla_fn(*inputs))

        self.generated = {}
        if len(contenders) > 1:
            self._log("compiling %d candidates in parallel", len(contenders))
            try:
                self.generated = _compile.prebuild([g for g, _ in contenders], self.backend)
            except Exception:  # each candidate's own build reports what failed
                self.generated = {}
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
        if self.cold_caches:
            self.arg_sets = _cold_inputs.rotation(inputs)
        self.timings, self.rounds = _profile.median_times(functions, inputs, **self._rotation())

        chosen, fn, source = self.kg, xla_fn, ""
        input_dtypes = [t.dtype for t in self.kg.inputs]
        # On a GPU at jax's default matmul precision, XLA's float32 dots (the reference) and
        # the kernels' run on TF32 tensor cores: the check allows TF32's rounding.
        tf32 = False
        if self.backend == "cuda":
            tf32 = toolchain.tf32_allowed()
        adversarial: _float_check.AdversarialSuite | None = None
        decided = 0
        for rank, name in enumerate(sorted(runnable, key=self.timings.__getitem__)):
            slower = self.timings[name] >= self.timings[XLA] and not forced
            if slower and rank > 0:
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
            if slower:  # checked all the same: the region as the model writes it may be slower
                decision = self._decide(name, candidate_fn, xla_fn, inputs)
                if self.runner_up is None or decision.ratio > self.runner_up[1].ratio:
                    self.runner_up = (runnable[name], decision, verdict, check)
                break
            if not forced:
                decision = self._decide(name, candidate_fn, xla_fn, inputs)
                self.decision = decision
                if not decision.kept:
                    self.dropped.append((name, f"not a clear win over XLA ({decision.describe()})"))
                    if self.runner_up is None or decision.ratio > self.runner_up[1].ratio:
                        self.runner_up = (runnable[name], decision, verdict, check)
                    decided += 1
                    if decided == DECISIONS:
                        break
                    continue
            chosen, fn, source = graph, candidate_fn, runnable[name].source
            self.verification, self.float_check = verdict, check
            break
        if chosen is self.kg and self.decision is not None and self.runner_up is not None:
            self.decision = self.runner_up[1]  # the report and verdict give the best loser's
        if adversarial is not None:
            self.adversarial = (
                f"{len(adversarial.patterns)} patterns, {adversarial.seconds:.2f} s in all"
            )

        self._warn_dropped(chosen)
        chosen_time = self.timings[XLA] if chosen is self.kg else self.timings[chosen.hash()]
        speedup = self.timings[XLA] / chosen_time if chosen_time > 0 else 1.0
        # A candidate that failed to compile may compile another time (a full disk, a
        # toolchain being upgraded): such a run's verdict is not worth keeping.
        failed_build = any(why.startswith(_BUILD_FAILURES) for _, why in self.dropped)
        measured = hasattr(self.timings, "samples")  # not a timer replaced by fixed times
        if key is not None and self.result is not None and measured and not failed_build:
            self._save_verdict(key, chosen)
        fast = Superoptimized(
            chosen,
            fn,
            source,
            dict(self.timings),
            speedup,
            report.text(self, chosen, speedup),
            {name: cost for name, cost in self.costs.items() if name in runnable},
        )
        if chosen is self.kg and self.runner_up is not None:
            r, d, verdict, check = self.runner_up
            checks = (
                f"float check at full size vs XLA's output of the original on random data: "
                f"{check}; adversarial float checks: passed ({self.adversarial})"
            )
            fast.runner_up = Superoptimized(
                r.graph,
                r.fn,
                r.source,
                dict(self.timings),
                d.ratio,
                report.runner_up_text(d.describe(), r.graph, verdict, checks),
            )
        return fast

    def _decide(
        self,
        name: str,
        candidate_fn: Callable[..., Any],
        xla_fn: Callable[..., Any],
        inputs: list[jax.Array],
    ) -> _decision.Decision:
        """Whether `name`'s win over XLA is statistically clear (mirage_jax/runtime/
        decision.py): the first timing's rounds, then more of the two alone while the
        interval straddles 1. Their medians replace the first ones."""
        more_times: dict[str, list[float]] = {XLA: [], name: []}

        def more(budget_s: float) -> Any:
            again, _ = _profile.median_times(
                {XLA: xla_fn, name: candidate_fn}, inputs, budget_s=budget_s, **self._rotation()
            )
            for n in more_times:
                more_times[n] += _decision.samples_of(again, n)
            return again

        times: Mapping[str, float] = self.timings
        samples = getattr(self.timings, "samples", None)
        if samples is not None:
            # The rounds XLA ran beside this candidate: an earlier decision's extra rounds
            # ran XLA beside another.
            rounds = len(samples[name])
            times = _profile.Times({XLA: samples[XLA][:rounds], name: samples[name]})
        decision = _decision.decide(times, XLA, name, more)
        if more_times[XLA] and hasattr(self.timings, "samples"):
            for n, extra in more_times.items():
                self.timings.samples[n] = self.timings.samples[n] + extra
                self.timings[n] = float(np.median(self.timings.samples[n]))
        elif more_times[XLA]:  # a replaced timer: its latest times stand
            self.timings.update({n: s[-1] for n, s in more_times.items()})
        self.rounds = decision.rounds if decision.rounds > 1 else self.rounds
        return decision

    def _save_verdict(self, key: str, chosen: KernelGraph) -> None:
        """Persists this run's choice with its evidence (mirage_jax/superopt/verdict_cache.py)."""
        d = self.decision
        picked = chosen is not self.kg
        doc: dict[str, Any] = {
            "scope": "region",
            "label": self.kg.label,
            "graph": self.kg.hash(),
            "chosen": chosen.hash() if picked else XLA,
            "graph_json": chosen.to_json() if picked else None,
            "ratio": d.ratio if d is not None else 1.0,
            "rounds": d.rounds if d is not None else self.rounds,
            "medians": dict(self.timings),
            "checks": (
                {
                    "verification": report.describe_verification(self.verification),
                    "float_check": str(self.float_check),
                    "adversarial": self.adversarial,
                }
                if picked and self.verification is not None
                else None
            ),
        }
        if d is not None:
            doc.update(low=d.low, high=d.high, confidence=_decision.CONFIDENCE)
            doc["decision"] = d.describe()
        if not picked and self.runner_up is not None:
            r, md, verification, float_check = self.runner_up
            doc["runner_up"] = {
                "chosen": r.graph.hash(),
                "graph_json": r.graph.to_json(),
                "ratio": md.ratio,
                "decision": md.describe(),
                "checks": {
                    "verification": report.describe_verification(verification),
                    "float_check": str(float_check),
                    "adversarial": self.adversarial,
                },
            }
        verdict_cache.save_or_warn(key, doc, self.kg.label)

    def _follow(self, key: str, stored: dict) -> Superoptimized | None:
        """The stored verdict's choice, without searching or timing; None (the verdict
        rejected, with one warning) when it names a graph that does not load, is not proven
        equivalent to this one, or does not compile. The float checks are not run again: the
        verdict records that they passed when it was measured."""
        xla_fn: Callable[..., Any] = _compile.jit(_compile.compile(self.kg, self.backend))
        medians = {str(k): float(v) for k, v in stored.get("medians", {}).items()}
        self.loaded = stored
        if stored["chosen"] == XLA:
            self.timings = medians
            fast = Superoptimized(
                self.kg, xla_fn, "", medians, 1.0, report.loaded_text(self, self.kg, 1.0)
            )
            # "marginal": a verdict stored before losing runners-up were kept too
            runner_up = stored.get("runner_up", stored.get("marginal"))
            if runner_up:
                loaded = self._load_chosen(key, runner_up, "its runner-up")
                if loaded is None:
                    return None
                graph, built, verdict = loaded
                checks = runner_up["checks"]
                fast.runner_up = Superoptimized(
                    graph,
                    _compile.jit(built.fn),
                    built.source,
                    medians,
                    float(runner_up["ratio"]),
                    report.runner_up_text(
                        f"when measured: {runner_up.get('decision', '?')}",
                        graph,
                        verdict,
                        f"float checks: not run again; they passed when the verdict was "
                        f"measured (float check: {checks.get('float_check', '?')}; "
                        f"adversarial: {checks.get('adversarial', '?')})",
                    ),
                )
            return fast
        loaded = self._load_chosen(key, stored, "its graph")
        if loaded is None:
            return None
        graph, built, verdict = loaded
        self.verification, self.timings = verdict, medians
        speedup = float(stored["ratio"])
        return Superoptimized(
            graph,
            _compile.jit(built.fn),
            built.source,
            medians,
            speedup,
            report.loaded_text(self, graph, speedup),
        )

    def _load_chosen(
        self, key: str, entry: dict, what: str
    ) -> tuple[KernelGraph, Any, VerifyResult] | None:
        """The graph a stored verdict names in `entry` (its "chosen" hash and "graph_json"),
        proven equivalent again and compiled; None, with the verdict rejected, otherwise."""
        try:
            graph = KernelGraph.from_json(entry["graph_json"])
            if graph.hash() != entry["chosen"] or not entry.get("checks"):
                raise ValueError("its graph is not the one it names, or its checks are missing")
        except Exception as e:
            verdict_cache.reject(key, f"{what} does not load ({_error_head(e)})")
            return None
        verdict = verify_equivalent(self.kg, graph, seed=(self.config.seed + 1) % 2**64)
        if not verdict:
            verdict_cache.reject(key, f"the verifier rejects {what}: {verdict.reason}")
            return None
        try:
            built = _compile.build(
                graph, self.backend, "superoptimize", self.generated.get(graph.hash())
            )
        except Exception as e:
            verdict_cache.reject(key, f"{what} does not compile ({_error_head(e)})")
            return None
        return graph, built, verdict

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
