"""The CPU cost model's numbers, measured on the machine that runs the search.

The "cpu" target's presets (cc/cost/target.cc) were measured on one development machine; a
machine with other memory, other cores or other load ranks candidates differently. Here each
number the roofline divides by is measured with a small probe, the way candidates run:

- dram_bandwidth: a generated kernel streaming a weight matrix (x[1, K] @ W[K, N], one
  block per core) from memory: the rate decode GEMVs get, not a library's. W holds twice
  the last-level cache up to 256 MiB, and its calls rotate over copies of it that together
  hold twice the cache (runtime/cold_inputs.py), as candidates are timed cold; the figure
  is their median, as a candidate's is (the streams' section below).
- generated_flops: a generated kernel's block matmuls on cache-resident tiles.
- generated_bf16_flops, generated_f32_bf16_flops: the same product of 256 rows with a
  bfloat16 weight, its x bfloat16 and float32: the rates of the generated code's
  bfloat16-weight path (the AMX tiles where the CPU has them, cc/codegen/cpu/prelude.cc),
  which the float32 rate misprices several times over.
- peak_flops, library_small_m_matmul_flops: jitted XLA matmuls, large and of 8 rows.
- library_small_m_bandwidth: a jitted XLA matmul of 8 rows over the streamed weight: XLA's
  small-M dots read a weight from memory far slower than a stream (or its one-row GEMV).
- split_stream_bandwidth: dram_bandwidth times how much slower a stream of 8 rows of x
  (fastest calls, on one W) runs cut into 64 column blocks (grouped into tasks of 4 KB runs
  by the code generator), each core walking several strips in turn, than with a block per
  core: 18% on the Intel development machine (5-12% in benchmarks/gemv_tiles.py's grids),
  an order of the candidates the model otherwise ties (cc/cost/target.h). At one row of x
  the same split measured 1-4%, which ranked two stored timings of the paper suite's
  candidates at a mean Spearman of 0.43 where 8 rows' ratio gave 0.52 and 0.60
  (benchmarks/ranking_replay.py rank --split-ratio).
- custom_call_overhead_s: a generated kernel doing almost nothing, less a jitted XLA op
  doing as little (both pay jit dispatch; only the custom call's share is the kernel's).
- block_overhead_s: the same tiny work cut into 64 blocks instead of one.
- run_overhead_s: a weight stored [out, in], W[N, K] @ x[K, 1], its rows walked 16 floats
  (one 64-byte cache line) at a time instead of whole: every block loads a line of each of
  its rows per iteration, as a decode attention's keys walked a few at a time do, and the
  prefetchers do not keep up with that many streams (8.7-9.5 ns a line-run here, where the
  128-byte runs of a column-split stream measured 0-1 ns): the extra time over the extra
  runs.
- page_walk_s: the streamed W cut into 64 column blocks, each loading its strip in 2 steps
  of 4096 rows (4096 pages, more than the TLB maps, revisited: kernel_work.h, paged_loads)
  instead of 32 steps of 256.

Each probe keeps its fastest of several runs: load from other processes only slows runs, so
the minimum is the closest to the machine's own figure, and the ranking does not follow the
load of the moment. The probes whose differences are figures (one block, many blocks and
XLA's tiny op; whole rows and line runs; the 8-row stream and strips) run in turn, round
after round, so that each difference compares minima taken under the same load.

The streams (stream, strips, page walks and XLA's 8-row product over W) are the exception:
the caches favour them as much as load slows them. On a machine with a 300 MiB cache, W
capped at 256 MiB stayed partly in it, and the fastest of its calls streamed 62 GB/s,
whether or not the calls rotated over copies of W, where their median over the copies was
37 GB/s; the candidates that ranking_replay.py times cold read their inputs at 22-28 GB/s
(an 8 MB score tensor, decode attention's 268 MB of K and V). With the stream figures at
0.6 of the fastest one (the median's share), the four stored timings of the paper suite's
candidates ranked at a mean Spearman of 0.68 instead of 0.64, the fastest candidate in the
model's top 4 in 29 of 44 programs instead of 27 (benchmarks/ranking_replay.py rank). So
the streams run as median_times runs candidates: in rounds, each call taking the next copy
of W, the median of each kept. The split stream keeps its ratio of fastest calls
(split_stream_bandwidth, above), applied to the median.

The whole measurement runs ROUNDS times and each figure is the median of its rounds: a
fastest run can still be one the machine favoured or a whole round can run slow, and
either moved the candidates the model nearly ties (a qknorm_gqa search ranked its
one-kernel form first under one measurement and fourth under the next).
Measuring compiles six small kernels and times them (a few seconds, once: the result is
kept per machine, superopt/calibration_cache.py).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax import _core
from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.ir.product_graphs import (
    PREFILL_PROJECTION,
    column_split_product,
    fitting_blocks,
    prefill_projection,
)
from mirage_jax.runtime import cold_inputs
from mirage_jax.runtime import compile as runtime_compile
from mirage_jax.runtime.profile import fastest_seconds, fastest_seconds_each, median_times
from mirage_jax.superopt import machine

RUNS = 12  # per probe; the fastest counts
STREAM_BUDGET_S = 0.5  # per set of streams timed together (median_times' budget)
ROUNDS = 3  # whole measurements; each figure's median counts
_STREAM_K = 8192
_STREAM_MAX_BYTES = 256 * 2**20
_TINY_BLOCKS = 64
_SPLIT_BLOCKS = 64
_LINE_FLOATS = 16  # one 64-byte cache line of float32


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What was measured, in the units of cc/cost/target.h."""

    cores: int
    last_level_cache_bytes: int
    dram_bandwidth: float  # bytes/s
    generated_flops: float  # flop/s
    generated_bf16_flops: float  # flop/s
    generated_f32_bf16_flops: float  # flop/s
    peak_flops: float  # flop/s
    library_small_m_matmul_flops: float  # flop/s
    library_small_m_bandwidth: float  # bytes/s
    split_stream_bandwidth: float  # bytes/s
    custom_call_overhead_s: float
    block_overhead_s: float
    run_overhead_s: float
    page_walk_s: float

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            positive = not field.name.endswith("_s")
            if not math.isfinite(value) or value < 0 or (positive and value == 0):
                raise ValueError(
                    f"calibration: {field.name} must be a finite "
                    f"{'positive' if positive else 'non-negative'} number, got {value!r}"
                )

    def to_json(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(doc: dict) -> Calibration:
        names = {f.name for f in dataclasses.fields(Calibration)}
        missing = names - set(doc)
        if missing:
            raise ValueError(f"calibration: fields missing: {sorted(missing)}")
        return Calibration(
            cores=int(doc["cores"]),
            last_level_cache_bytes=int(doc["last_level_cache_bytes"]),
            **{n: float(doc[n]) for n in sorted(names - {"cores", "last_level_cache_bytes"})},
        )

    def target(self) -> _core.Target:
        """The "cpu" target with these numbers in place of the presets."""
        t = _core.Target.cpu_host()
        t.cores = self.cores
        t.last_level_cache_bytes = self.last_level_cache_bytes
        t.dram_bandwidth = self.dram_bandwidth
        t.generated_flops = self.generated_flops
        t.generated_bf16_flops = self.generated_bf16_flops
        t.generated_f32_bf16_flops = self.generated_f32_bf16_flops
        t.peak_flops = self.peak_flops
        t.library_small_m_matmul_flops = self.library_small_m_matmul_flops
        t.library_small_m_bandwidth = self.library_small_m_bandwidth
        t.split_stream_bandwidth = self.split_stream_bandwidth
        t.custom_call_overhead_s = self.custom_call_overhead_s
        t.block_overhead_s = self.block_overhead_s
        t.run_overhead_s = self.run_overhead_s
        t.page_walk_s = self.page_walk_s
        t.vector_width_floats = machine.vector_floats()
        t.check()
        return t

    def summary(self) -> str:
        return (
            f"{self.cores} cores, memory {self.dram_bandwidth / 1e9:.1f} GB/s "
            f"({self.split_stream_bandwidth / 1e9:.1f} split over more blocks), generated "
            f"kernels {self.generated_flops / 1e9:.0f} GFLOP/s (bfloat16 weights "
            f"{self.generated_bf16_flops / 1e9:.0f}, with a float32 x "
            f"{self.generated_f32_bf16_flops / 1e9:.0f}), XLA matmul "
            f"{self.peak_flops / 1e9:.0f} GFLOP/s ({self.library_small_m_matmul_flops / 1e9:.0f} "
            f"at 8 rows, streaming {self.library_small_m_bandwidth / 1e9:.1f} GB/s), custom "
            f"call {self.custom_call_overhead_s * 1e6:.1f} us, block "
            f"{self.block_overhead_s * 1e6:.2f} us, run {self.run_overhead_s * 1e9:.1f} ns, "
            f"page walk {self.page_walk_s * 1e9:.1f} ns"
        )


def usable_cores() -> int:
    """The cores this process may run on: its affinity mask, not the machine's core count,
    which overcounts in containers and under taskset."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _row_walk_kernel(n: int, k: int, blocks: int, k_tile: int) -> KernelGraph:
    """w[n, k] @ x[k, 1] as one generated kernel: `blocks` blocks over n, a loop over k
    reading `k_tile` floats of each of the block's rows per iteration."""
    kg = KernelGraph()
    w, x = kg.new_input((n, k)), kg.new_input((k, 1))
    bg = BlockGraph(grid=(blocks, 1, 1), forloop_range=k // k_tile)
    split = (0 if blocks > 1 else -1, -1, -1)  # one block: nothing to split (an IR error)
    wb = bg.new_input(w, imap=split, fmap=1)
    xb = bg.new_input(x, imap=(-1, -1, -1), fmap=0)
    bg.new_output(bg.accum_sum(bg.matmul(wb, xb)), omap=split)
    (y,) = kg.customized([w, x], bg)
    kg.mark_output(y)
    return kg


def _scale_kernel(rows: int, blocks: int) -> KernelGraph:
    """x[rows, 16] * 2 as one generated kernel of `blocks` blocks over the rows."""
    kg = KernelGraph()
    x = kg.new_input((rows, 16))
    bg = BlockGraph(grid=(blocks, 1, 1))
    split = (0 if blocks > 1 else -1, -1, -1)
    xb = bg.new_input(x, imap=split, fmap=-1)
    bg.new_output(bg.mul_scalar(xb, 2.0), omap=split)
    (y,) = kg.customized([x], bg)
    kg.mark_output(y)
    return kg


def _stream_columns(cache_bytes: int) -> int:
    """Columns of the streamed W[K, N]: twice the cache, a multiple of 256, within a cap."""
    wanted = min(2 * cache_bytes, _STREAM_MAX_BYTES) // (4 * _STREAM_K)
    return max(1024, (wanted // 256) * 256)


def probe_kernels(cores: int, n_stream: int) -> dict[str, KernelGraph]:
    """The probes, by name, each with a block per core where its columns split that evenly
    (else the most blocks that do: a grid that does not divide them is an error)."""
    per_core = fitting_blocks(n_stream, cores)
    return {
        "stream": column_split_product(1, _STREAM_K, n_stream, per_core, 256),
        "strips": column_split_product(1, _STREAM_K, n_stream, _SPLIT_BLOCKS, 256),
        "stream, 8 rows": column_split_product(8, _STREAM_K, n_stream, per_core, 256),
        "strips, 8 rows": column_split_product(8, _STREAM_K, n_stream, _SPLIT_BLOCKS, 256),
        "page walks": column_split_product(1, _STREAM_K, n_stream, _SPLIT_BLOCKS, _STREAM_K // 2),
        "whole rows": _row_walk_kernel(n_stream, _STREAM_K, per_core, _STREAM_K),
        "line runs": _row_walk_kernel(n_stream, _STREAM_K, per_core, _LINE_FLOATS),
        "compute": column_split_product(128, 1024, 1024, fitting_blocks(1024, 4 * cores), 128),
        "bf16 weight": prefill_projection(cores, "bfloat16"),
        "f32 x bf16 weight": prefill_projection(cores, "float32"),
        "one block": _scale_kernel(_TINY_BLOCKS, 1),
        "many blocks": _scale_kernel(_TINY_BLOCKS, _TINY_BLOCKS),
    }


def median_of(found: Sequence[Calibration]) -> Calibration:
    """Each figure's median over whole measurements (the lower middle of an even count)."""
    if not found:
        raise ValueError("median_of: no calibrations")
    middle = (len(found) - 1) // 2
    figures = {
        field.name: sorted(getattr(c, field.name) for c in found)[middle]
        for field in dataclasses.fields(Calibration)
    }
    return Calibration(**figures)


def measure(log: Callable[[str], None] = lambda _: None, rounds: int = ROUNDS) -> Calibration:
    """Runs the probes `rounds` times (a few seconds each) and returns each figure's median:
    a probe's fastest run is stable against load that only slows it, but not against a run
    that the machine favours (a stream finding part of its weight still in the caches: 55.5
    GB/s between two measurements of 31.5 and 32.5 within seconds here) or a whole
    measurement slowed at once (XLA's 8-row product at 79 GFLOP/s between two of 137 and
    143), and each such figure reorders the candidates the model nearly ties."""
    cores = usable_cores()
    cache_bytes = cold_inputs.last_level_cache_bytes()
    n_stream = _stream_columns(cache_bytes)
    kernels = probe_kernels(cores, n_stream)
    log(f"compiling {len(kernels)} probe kernels")
    runtime_compile.prebuild(list(kernels.values()))
    fns = {name: jax.jit(runtime_compile.compile(kg)) for name, kg in kernels.items()}
    rng = np.random.default_rng(0)

    def inputs(kg: KernelGraph) -> list[jax.Array]:
        return [
            jax.device_put(rng.standard_normal(t.shape, dtype=np.float32).astype(t.dtype))
            for t in kg.inputs
        ]

    probe_inputs = {
        name: inputs(kernels[name])
        for name in (
            "stream",
            "whole rows",
            "one block",
            "compute",
            "bf16 weight",
            "f32 x bf16 weight",
        )
    }
    # 8 rows of x over the streamed W: the split-stream probes' and XLA's small-M stream's.
    x8 = rng.standard_normal((8, _STREAM_K), dtype=np.float32)
    probe_inputs["stream, 8 rows"] = [jax.device_put(x8), probe_inputs["stream"][1]]
    # W and its copies, which the streams' calls take in turn (the module's docstring).
    probe_inputs["stream copies"] = [
        s[0] for s in cold_inputs.rotation([probe_inputs["stream"][1]])
    ]
    found = []
    for round_ in range(rounds):
        log(f"timing the probes ({round_ + 1} of {rounds})")
        found.append(_timed(cores, cache_bytes, n_stream, fns, probe_inputs, rng))
    return median_of(found)


def _timed(
    cores: int,
    cache_bytes: int,
    n_stream: int,
    fns: Mapping[str, Callable],
    probe_inputs: dict[str, list[jax.Array]],
    rng: np.random.Generator,
) -> Calibration:
    """One measurement of every figure with the compiled probes."""
    x_one, x_eight = probe_inputs["stream"][0], probe_inputs["stream, 8 rows"][0]
    copies = probe_inputs["stream copies"]
    one_row = [[x_one, w] for w in copies]
    eight_rows = [[x_eight, w] for w in copies]
    walked = {name: fns[name] for name in ("stream", "strips", "page walks")}
    walks, _ = median_times(walked, one_row[0], STREAM_BUDGET_S, one_row)
    stream_s, strips_s, page_walks_s = (walks[name] for name in walked)
    matmul = jax.jit(jnp.matmul)
    small_m, _ = median_times({"xla": matmul}, eight_rows[0], STREAM_BUDGET_S, eight_rows)
    small_m_stream_s = small_m["xla"]
    # The split's share of the stream is a ratio of fastest calls on one W, as it was before
    # the streams went cold. Neither way measures it well here: cold medians put it at
    # 0.99-1.04 in eight single measurements, fastest calls at 0.955 (a median of three)
    # and 1.006-1.009 in two; its side of 1 decides the order of the candidates it prices
    # (six stored timings: mean Spearman 0.69 below 1, 0.62-0.64 at 1 or above).
    split = {name: fns[name] for name in ("stream, 8 rows", "strips, 8 rows")}
    splits = fastest_seconds_each(split, probe_inputs["stream, 8 rows"], RUNS)
    stream8_s, strips8_s = (splits[name] for name in split)
    rows = {name: fns[name] for name in ("whole rows", "line runs")}
    row_walks = fastest_seconds_each(rows, probe_inputs["whole rows"], RUNS)
    whole_rows_s, line_runs_s = (row_walks[name] for name in rows)
    tiny = probe_inputs["one block"]
    dispatched: dict[str, Callable] = {
        "one block": fns["one block"],
        "many blocks": fns["many blocks"],
        "xla": jax.jit(lambda x: x * 2.0),
    }
    dispatches = fastest_seconds_each(dispatched, tiny, 8 * RUNS)
    one_block_s, many_blocks_s, xla_tiny_s = (dispatches[name] for name in dispatched)

    a = jax.device_put(rng.standard_normal((512, 1024), dtype=np.float32))
    b = jax.device_put(rng.standard_normal((1024, 1024), dtype=np.float32))
    # The generated kernels' compute rate and XLA's, in alternating stretches: timed one
    # after the other, a slow stretch of the machine fell on one of them alone, and the model
    # ranked every compute-bound candidate by it (stored once per machine: 98, 142 and 194
    # GFLOP/s for the same probe on one machine within an hour, XLA's 183-197). Stretches,
    # not single calls in turn: the probe is of cache-resident tiles, and each call of the
    # other matmul evicted them (145-159 GFLOP/s alternating call by call).
    rated = ("compute", "bf16 weight", "f32 x bf16 weight")
    rates = fastest_seconds_each(
        {
            **{name: functools.partial(fns[name], *probe_inputs[name]) for name in rated},
            "library": lambda: matmul(a, b),
        },
        (),
        4 * RUNS,
        stretch=RUNS,
    )
    compute_s, library_s = rates["compute"], rates["library"]
    m, k, n, _ = PREFILL_PROJECTION
    x8 = jax.device_put(rng.standard_normal((8, 2048), dtype=np.float32))
    w8 = jax.device_put(rng.standard_normal((2048, 1024), dtype=np.float32))
    small_m_s = fastest_seconds(matmul, [x8, w8], 4 * RUNS)

    return Calibration(
        cores=cores,
        last_level_cache_bytes=cache_bytes,
        dram_bandwidth=4.0 * _STREAM_K * n_stream / stream_s,
        generated_flops=2.0 * 128 * 1024 * 1024 / compute_s,
        generated_bf16_flops=2.0 * m * k * n / rates["bf16 weight"],
        generated_f32_bf16_flops=2.0 * m * k * n / rates["f32 x bf16 weight"],
        peak_flops=2.0 * 512 * 1024 * 1024 / library_s,
        library_small_m_matmul_flops=2.0 * 8 * 2048 * 1024 / small_m_s,
        library_small_m_bandwidth=4.0 * _STREAM_K * n_stream / small_m_stream_s,
        split_stream_bandwidth=4.0 * _STREAM_K * n_stream / stream_s * stream8_s / strips8_s,
        custom_call_overhead_s=max(0.0, one_block_s - xla_tiny_s),
        block_overhead_s=max(0.0, many_blocks_s - one_block_s) / math.ceil(_TINY_BLOCKS / cores),
        # The model spreads runs and page walks over the cores (cc/cost/roofline.cc). The
        # line-run probe loads n * k / _LINE_FLOATS runs where whole rows are one run per
        # block; the page-walk probe's 64 blocks each walk K/2 pages twice (more than the TLB
        # maps), where the strips' loads of 256 rows fit it.
        run_overhead_s=max(0.0, line_runs_s - whole_rows_s)
        * cores
        / (n_stream * (_STREAM_K // _LINE_FLOATS) - fitting_blocks(n_stream, cores)),
        page_walk_s=max(0.0, page_walks_s - strips_s) * cores / (_STREAM_K * _SPLIT_BLOCKS),
    )
