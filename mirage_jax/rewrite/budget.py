"""How one function's optimization time is spent: a region is searched only when a fused
kernel could beat XLA by enough to matter, and the function's budget is shared among the
regions that could, by their expected gain.

The expected gain of a region is XLA's measured time on it minus the roofline bound of one
fused kernel: its flops at the machine's matmul rate and its input and output bytes at the
machine's copy bandwidth, both measured with XLA itself, once per process. A region with a
bfloat16 input takes the faster of that matmul rate and a generated bfloat16 product's
(on a CPU with AMX tiles several times XLA's: cc/codegen/cpu/prelude.cc, matmul_amx). A region whose
XLA time is already within SKIP_WITHIN of that bound (a large matmul XLA runs at full rate),
or whose possible gain is below a kernel dispatch, is not searched at all.

Each searched region's search gets a share of what is left of the budget in proportion to
its gain, rounded down to one of SEARCH_STEPS (a short list, so that a rerun on a slightly
noisier machine lands on the same step, and the search cache answers it) and never more
than the region's own config allows. Compile and timing are charged to the budget as they
happen; when it is spent, the remaining regions run as plain JAX and explain() says so.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax.ir.graph import KernelGraph
from mirage_jax.ir.product_graphs import PREFILL_PROJECTION, prefill_projection
from mirage_jax.runtime import cold_inputs as _cold_inputs
from mirage_jax.runtime import compile as _compile
from mirage_jax.runtime import profile as _profile

# Default for optimize(budget_s=): sized so that a 2-4 layer transformer's first call
# finishes within about 30 s cold on 2 cores (measured in benchmarks/first_call.py).
DEFAULT_BUDGET_S = 20.0
# XLA within this fraction of the fused bound: a kernel cannot gain enough to be worth it.
SKIP_WITHIN = 0.10
# Below this many seconds of gain per call a kernel's dispatch eats the gain.
MIN_GAIN_S = 20e-6
# A run this many times past its budget does no more regions (they run as plain JAX).
OVERRUN = 2.0
# Of each region's share, this much goes to its search; the rest pays compile and timing.
SEARCH_FRACTION = 0.5
SEARCH_STEPS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
_XLA_TIMING_S = 0.2  # wall time of each region's XLA measurement
ESTIMATE = "xla estimate"  # the name XLA's timing of a region goes by here
# What one more candidate costs, in seconds, for sizing how many to compile: g++ -O3 of its
# kernel (0.17-0.52 s for the paper's kernels here with the precompiled header, 0.65-1.1 s
# before it; built in parallel, one per core) and its share of the timing rounds (0.5 s
# steps). Not lowered with the compiles: more candidates a region change its decisions,
# which want a models_run.py comparison first.
CANDIDATE_S = 2.0


@dataclasses.dataclass(frozen=True)
class MachineRates:
    """What XLA reaches here: f32 matmul flops per second and copy bytes per second."""

    flops_per_s: float
    bytes_per_s: float


@functools.cache
def machine_rates(platform: str = "cpu") -> MachineRates:
    """Measured once per process and platform ("cpu" or "gpu"), in about 0.3 s on a CPU."""
    device = jax.devices(platform)[0]
    n = 1024 if platform == "cpu" else 4096  # large enough for XLA's full matmul rate
    with jax.ensure_compile_time_eval():
        a = jax.device_put(jnp.ones((n, n), jnp.float32), device)
        flops = 2 * n**3 / _profile.fastest_seconds(jax.jit(jnp.matmul), (a, a))
        m = 1 << (22 if platform == "cpu" else 26)  # 16 MiB / 256 MiB of f32
        x = jax.device_put(jnp.ones((m,), jnp.float32), device)
        # The faster of a read and a read-write stream: an underestimate would skip regions
        # a kernel could speed up; an overestimate only costs a search.
        read = 4 * m / _profile.fastest_seconds(jax.jit(jnp.sum), (x,))
        copy = 2 * 4 * m / _profile.fastest_seconds(jax.jit(lambda v: v + 1.0), (x,))
    return MachineRates(flops, max(read, copy))


@functools.cache
def bf16_flops_per_s(platform: str = "cpu") -> float:
    """The faster of XLA's float32 matmul rate and a generated bfloat16 product's, measured
    once per process (its kernel compiled once per machine, then loaded from the cache).
    Only CPU kernels have a bfloat16 path of their own; elsewhere, XLA's rate."""
    rate = machine_rates(platform).flops_per_s
    if platform != "cpu":
        return rate
    m, k, n, _ = PREFILL_PROJECTION
    kg = prefill_projection(2, "bfloat16")
    device = jax.devices(platform)[0]
    with jax.ensure_compile_time_eval():
        x = jax.device_put(np.full((m, k), 0.5, dtype=jnp.bfloat16), device)
        w = jax.device_put(np.full((k, n), 0.5, dtype=jnp.bfloat16), device)
        seconds = _profile.fastest_seconds(jax.jit(_compile.compile(kg, "cpu")), (x, w))
    return max(rate, 2 * m * k * n / seconds)


def _flops_per_s(kg: KernelGraph, platform: str) -> float:
    if any(jnp.dtype(t.dtype) == jnp.bfloat16 for t in kg.inputs):
        return bf16_flops_per_s(platform)
    return machine_rates(platform).flops_per_s


def _bytes(tensors) -> int:
    return sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in tensors)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A region's measured XLA time and the roofline bound of one fused kernel for it."""

    xla_s: float
    bound_s: float

    @property
    def gain_s(self) -> float:
        return max(0.0, self.xla_s - self.bound_s)

    def why_not(self) -> str | None:
        """None when the region is worth searching, else why not (for explain)."""
        head = (
            f"XLA takes {self.xla_s * 1e3:.3f} ms and one fused kernel's roofline bound is "
            f"{self.bound_s * 1e3:.3f} ms"
        )
        if self.gain_s < SKIP_WITHIN * self.xla_s:
            return f"not searched: {head}; XLA is within {SKIP_WITHIN:.0%} of the bound"
        if self.gain_s < MIN_GAIN_S:
            return f"not searched: {head}; a gain under {MIN_GAIN_S * 1e6:.0f} µs per call"
        return None


def estimate(kg: KernelGraph, flops: float, backend: str, cold_caches: bool = False) -> Estimate:
    """The region's XLA time (its original graph run by XLA, best of a few calls on random
    data; `cold_caches`: with its inputs evicted from the CPU caches) and its fused bound on
    this machine."""
    platform = "gpu" if backend == "cuda" else "cpu"
    rates = machine_rates(platform)
    bound = max(
        flops / _flops_per_s(kg, platform), _bytes([*kg.inputs, *kg.outputs]) / rates.bytes_per_s
    )
    device = jax.devices(platform)[0]
    with jax.ensure_compile_time_eval():
        # XLA's time does not depend on the values; random ones would cost a generator run
        # (or a compile) per weight, seconds for a model.
        inputs = [
            jax.device_put(np.full(t.shape, 0.5, dtype=jnp.dtype(t.dtype)), device)
            for t in kg.inputs
        ]
        fn = jax.jit(_compile.compile(kg, backend))
        cold = _cold_inputs.rotation(inputs) if cold_caches and backend == "cpu" else None
        rotation = {"arg_sets": cold} if cold else {}
        times, _ = _profile.median_times({ESTIMATE: fn}, inputs, budget_s=_XLA_TIMING_S, **rotation)
    return Estimate(times[ESTIMATE], bound)


def search_step(seconds: float) -> float:
    """The largest SEARCH_STEPS entry not above `seconds` (the smallest one at least)."""
    fitting = [s for s in SEARCH_STEPS if s <= seconds]
    return fitting[-1] if fitting else SEARCH_STEPS[0]


@dataclasses.dataclass(frozen=True)
class Allotment:
    """A region group's planned share: seconds of search and how many candidates to compile."""

    search_s: float
    top_k: int


def plan(gains: list[float], budget_s: float, caps: list[float]) -> list[Allotment]:
    """Each group's share of `budget_s` by its gain, fixed before any work starts: the plan
    depends only on the (cached) estimates, so every process with the same cache plans the
    same searches and the search cache answers them."""
    total = sum(gains)
    out = []
    for gain, cap in zip(gains, caps):
        share = budget_s * (gain / total if total > 0 else 1.0 / len(gains))
        search = min(search_step(share * SEARCH_FRACTION), cap)  # a config's own cap exactly
        top_k = max(1, min(4, int(share * (1 - SEARCH_FRACTION) / CANDIDATE_S)))
        out.append(Allotment(search, top_k))
    return out


class FunctionBudget:
    """The wall-clock budget of optimizing one function, shared by its regions."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.started = time.perf_counter()

    def spent(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float:
        return max(0.0, self.seconds - self.spent())

    def overrun(self) -> bool:
        """Whether this run is past OVERRUN times its budget."""
        return self.spent() > OVERRUN * self.seconds
