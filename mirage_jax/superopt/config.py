"""SearchConfig: what the μGraph search (cc/search) explores and for how long, validated in
Python so that a bad field is a TypeError or ValueError naming it before any work starts; and
the limits a region of an optimized function gets when the user passes no config.

One set of limits does not fit every region: a gated MLP fuses into one kernel only with six
block ops (two matmuls, two accumulators, silu, mul), while six block ops make an attention
region's search ten times longer than the five its online-softmax kernel needs, and attention
wants grids over two axes (batch and heads) where an MLP needs one. A region is judged by
its graph: one with an exp holds a softmax.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import operator
from collections.abc import Sequence

from mirage_jax import _core
from mirage_jax.ir import args as _args
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.ir.handles import Tensor
from mirage_jax.superopt import calibration, user_structure

PRESETS = ("auto", "mlp", "attention", "lora")
TARGETS = {
    "cpu": _core.Target.cpu_host,
    "a100": _core.Target.a100,
    "h100": _core.Target.h100,
    "h200": _core.Target.h200,
}

_CORE_DEFAULTS = _core.SearchConfig()
_UINT64_LIMIT = 2**64


def _where(field: str) -> str:
    # The wording of _args, which checks the plain integer and choice fields.
    return f"SearchConfig: argument '{field}'"


def _at_least(value: object, minimum: int, field: str) -> int:
    number = _args.integer(value, "SearchConfig", field)
    if number < minimum:
        raise ValueError(f"{_where(field)} must be >= {minimum}, got {number}")
    return number


def _sizes(value: object, field: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            f"{_where(field)} must be None or a list of positive integers, "
            f"got {type(value).__name__} {value!r}"
        )
    if not value:
        raise ValueError(f"{_where(field)} is empty; use None to derive the sizes from the shapes")
    return tuple(_at_least(v, 1, f"{field}[{i}]") for i, v in enumerate(value))


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """What to search and for how long (cc/search).

    preset: "mlp" (grids split only indices that reach the outputs), "attention" (grids may
        also split a reduced index: split-KV partial results), "lora" (allows concat), or
        "auto": the one the graph's structure asks for (preset_for).
    time_budget_s: wall time; the best found so far comes back when it is spent (a program
        that can be cut keeps half of it for its parts: docs/search-config.md).
    threads: worker threads; None uses every core this process may run on.
    pruning: abstract-expression pruning; turn off only for ablations (it is hours slower).
    max_kernel_ops, max_block_ops, max_block_graphs, max_block_inputs, max_block_outputs,
    max_grid_axes, max_grids, max_forloop_ranges: limits on the enumerated graphs.
    max_verified: None verifies every complete candidate as it is found; N collects them
        unverified, ranks them with the cost model and verifies best first until N are
        accepted (the rest are dropped unverified; every returned candidate is verified).
    grid_sizes, forloop_ranges: when given, replace the sizes derived from the shapes and the
        target (each must still divide the dims it splits).
    grids, imaps, omaps, fmaps: structure the caller fixes, as Mirage's griddims, imaps,
        omaps and fmaps (docs/search-config.md); None lets the search choose.
        grids: grids of 1 to 3 block counts, e.g. ((2, 8, 16),); when given, block graphs
        use only these, in place of the derived grids, grid_sizes, max_grid_axes, max_grids
        and the target's cap on blocks; each axis of more than one block splits an index
        whose size it divides. imaps, omaps: maps with one entry per grid axis, the tensor
        dim that axis splits (-1: none; an axis of one block is always -1), as block graph
        inputs print imap=(1, -1, -1); when given, every block graph input uses one of the
        imaps and every output one of the omaps. fmaps: the dims a for-loop may walk in an
        input (-1: not walked); when given, every input's fmap is one of them. A map with
        fewer than 3 entries leaves the axes after it unsplit. Values no tensor of the graph
        can take are a ValueError when the search starts; otherwise a structure that admits
        no block graph leaves only kernel-level candidates (the graph itself among them).
    deepen: climb to the limits from narrow ones (mirage_jax/superopt/deepening.py), so
        that what narrower limits find is never lost to wider ones; False runs the limits as
        given, in one depth-first search.
    seed: the verifier's randomness.
    target: the machine the cost model ranks for: "cpu" (this host's class), "a100", "h100",
        "h200".
    """

    preset: str = "auto"
    time_budget_s: float = 120.0
    threads: int | None = None
    pruning: bool = True
    max_kernel_ops: int = _CORE_DEFAULTS.max_kernel_ops
    max_block_ops: int = _CORE_DEFAULTS.max_block_ops
    max_block_graphs: int = _CORE_DEFAULTS.max_block_graphs
    max_block_inputs: int = _CORE_DEFAULTS.max_block_inputs
    max_block_outputs: int = _CORE_DEFAULTS.max_block_outputs
    max_grid_axes: int = _CORE_DEFAULTS.max_grid_axes
    max_grids: int = _CORE_DEFAULTS.max_grids
    max_forloop_ranges: int = _CORE_DEFAULTS.max_forloop_ranges
    max_verified: int | None = None
    grid_sizes: tuple[int, ...] | None = None
    forloop_ranges: tuple[int, ...] | None = None
    grids: tuple[tuple[int, ...], ...] | None = None
    imaps: tuple[tuple[int, ...], ...] | None = None
    omaps: tuple[tuple[int, ...], ...] | None = None
    fmaps: tuple[int, ...] | None = None
    seed: int = 0
    target: str = "cpu"
    deepen: bool = True

    def __post_init__(self) -> None:
        grids = user_structure.grids(self.grids)  # the maps are checked against them
        checked = {
            "preset": _args.choice(self.preset, PRESETS, "SearchConfig", "preset"),
            "time_budget_s": self._budget(self.time_budget_s),
            "threads": None if self.threads is None else _at_least(self.threads, 1, "threads"),
            "pruning": self._flag(self.pruning, "pruning"),
            "max_kernel_ops": _at_least(self.max_kernel_ops, 1, "max_kernel_ops"),
            "max_block_ops": _at_least(self.max_block_ops, 1, "max_block_ops"),
            # 0 block graphs: only kernel-level rewrites.
            "max_block_graphs": _at_least(self.max_block_graphs, 0, "max_block_graphs"),
            "max_block_inputs": self._block_inputs(self.max_block_inputs),
            "max_block_outputs": _at_least(self.max_block_outputs, 1, "max_block_outputs"),
            # 0 grid axes: single-block kernels only.
            "max_grid_axes": _at_least(self.max_grid_axes, 0, "max_grid_axes"),
            "max_grids": _at_least(self.max_grids, 1, "max_grids"),
            # 0 for-loop ranges: no for-loops.
            "max_forloop_ranges": _at_least(self.max_forloop_ranges, 0, "max_forloop_ranges"),
            "max_verified": (
                None
                if self.max_verified is None
                else _at_least(self.max_verified, 1, "max_verified")
            ),
            "grid_sizes": _sizes(self.grid_sizes, "grid_sizes"),
            "forloop_ranges": _sizes(self.forloop_ranges, "forloop_ranges"),
            "grids": grids,
            "imaps": user_structure.maps(self.imaps, "imaps", grids),
            "omaps": user_structure.maps(self.omaps, "omaps", grids),
            "fmaps": user_structure.fmaps(self.fmaps),
            "seed": self._seed(self.seed),
            "target": _args.choice(self.target, tuple(TARGETS), "SearchConfig", "target"),
            "deepen": self._flag(self.deepen, "deepen"),
        }
        # Normalized values (numpy ints to int, lists to tuples) keep the config hashable.
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @staticmethod
    def _budget(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"{_where('time_budget_s')} must be a number of seconds, "
                f"got {type(value).__name__} {value!r}"
            )
        seconds = float(value)
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(
                f"{_where('time_budget_s')} must be positive and finite, got {seconds}"
            )
        return seconds

    @staticmethod
    def _flag(value: object, field: str) -> bool:
        if not isinstance(value, bool):
            raise TypeError(f"{_where(field)} must be a bool, got {type(value).__name__} {value!r}")
        return value

    @staticmethod
    def _block_inputs(value: object) -> int:
        number = _at_least(value, 1, "max_block_inputs")
        if number > _core.MAX_BLOCK_INPUTS:
            raise ValueError(
                f"{_where('max_block_inputs')} must be <= {_core.MAX_BLOCK_INPUTS} "
                f"(the most inputs one search op may have), got {number}"
            )
        return number

    @staticmethod
    def _seed(value: object) -> int:
        if isinstance(value, bool):
            raise TypeError(f"{_where('seed')} must be an integer, got bool {value!r}")
        try:
            seed = operator.index(value)  # type: ignore[arg-type]  # raises for non-integers
        except TypeError:
            raise TypeError(
                f"{_where('seed')} must be an integer, got {type(value).__name__} {value!r}"
            ) from None
        if not 0 <= seed < _UINT64_LIMIT:
            raise ValueError(f"{_where('seed')} must be in [0, 2**64), got {seed}")
        return seed

    def for_graph(self, graph: KernelGraph) -> SearchConfig:
        """This config with an "auto" preset replaced by the one `graph` asks for."""
        if self.preset != "auto":
            return self
        return dataclasses.replace(self, preset=preset_for(graph))

    def _to_core(self) -> _core.SearchConfig:
        if self.preset == "auto":
            raise ValueError("SearchConfig: an 'auto' preset is resolved by for_graph(graph)")
        core = _core.SearchConfig()
        for name in (
            "preset",
            "time_budget_s",
            "pruning",
            "max_kernel_ops",
            "max_block_ops",
            "max_block_graphs",
            "max_block_inputs",
            "max_block_outputs",
            "max_grid_axes",
            "max_grids",
            "max_forloop_ranges",
            "seed",
        ):
            setattr(core, name, getattr(self, name))
        core.max_verified = self.max_verified or 0
        core.threads = calibration.usable_cores() if self.threads is None else self.threads
        core.grid_sizes_override = list(self.grid_sizes or ())
        core.forloop_ranges_override = list(self.forloop_ranges or ())
        core.grids = [user_structure.padded(g, 1) for g in self.grids or ()]
        core.imaps = [user_structure.padded(m, -1) for m in self.imaps or ()]
        core.omaps = [user_structure.padded(m, -1) for m in self.omaps or ()]
        core.fmaps = list(self.fmaps or ())
        core.target = TARGETS[self.target]()
        return core


def preset_for(graph: KernelGraph) -> str:
    """ "attention" for a graph with an exp (a softmax: split-KV partials pay off); "lora" for
    a sum of two matmuls one of which multiplies another's result (X·W + (X·A)·B: one matmul
    over concatenated operands); else "mlp"."""
    ops = graph.ops
    if any(op.kind == "exp" for op in ops):
        return "attention"

    def made_by_matmul(t: Tensor) -> bool:
        return t.producer.kind == "matmul"

    chained = any(op.kind == "matmul" and any(map(made_by_matmul, op.inputs)) for op in ops)
    summed = any(op.kind == "add" and all(map(made_by_matmul, op.inputs)) for op in ops)
    return "lora" if chained and summed else "mlp"


# -- per-region defaults (mirage_jax.optimize) -----------------------------------------

# superoptimize times only the best few candidates, so only the cost model's best 8 are
# verified (attention regions find hundreds). Not deepened: these narrow limits were sized
# for first-call latency (one kernel op), and their rungs would repeat work within the
# function's budget (GPT-2 prefill's cold first call measured 13.5-31 s deepened against
# 4.4-25.6 s before).
MLP = SearchConfig(
    max_kernel_ops=1, max_block_ops=6, time_budget_s=60, max_verified=8, deepen=False
)
ATTENTION = SearchConfig(
    preset="attention",
    max_kernel_ops=1,
    max_block_ops=5,
    max_grid_axes=2,
    max_grids=2,
    max_forloop_ranges=1,
    time_budget_s=60,
    max_verified=8,
    deepen=False,
)


def default_config(graph: KernelGraph) -> SearchConfig:
    """ATTENTION for a region whose kernel graph has an exp, else MLP."""
    return ATTENTION if any(op.kind == "exp" for op in graph.ops) else MLP
