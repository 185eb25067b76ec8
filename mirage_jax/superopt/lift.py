"""A program as one kernel, op for op: the candidate a search too narrow for it misses.

The decorator's search limits are sized for first-call latency (5 or 6 block ops). A decode
step's attention scores with their mask and softmax, as the frontend converts them
(sum(q * K) over the head dim, a scale, a select, then max, sub, exp, sum and div over the
keys: 9 ops), need more, and the search finds nothing in its budget: XLA then runs the
region at several times a stream of K. Yet such a program needs no search to fuse. Each of
its ops works along some dims and leaves the others alone (the batch and the heads here),
so one block graph holding every op, over a grid along dims no op reduces, computes it with
every block reading its own slice of each input once. This module builds those graphs;
search.py verifies and costs them like its own candidates, when its search found no fused
one.

Only elementwise ops, select, reduce and rms_norm are lifted: a matmul's or a concat's
result is what the search itself fuses well, with for-loops a lift does not have.
"""

from __future__ import annotations

from typing import TypeVar

from mirage_jax import _core
from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.ir.handles import Op, Tensor

_T = TypeVar("_T")

# The C++ core's op table: each kind's class ("unary", "reduce", ...) and the attribute it
# carries ("scalar", "eps", "dim_reduce", ...). A lift reads it instead of naming kinds, so
# an op added to the IR is lifted by its class or not at all.
_SCHEMA = {op["name"]: (op["class"], op["attribute"]) for op in _core.op_schema()}
# Grids of at most this many blocks: enough to spread over the cores, few enough that each
# block's tiles are long runs.
MAX_BLOCKS = 64


def _attr(value: _T | None, op: Op) -> _T:
    """An attribute `op`'s kind always carries (its dim, scalar or reduce kind)."""
    if value is None:
        raise ValueError(f"lift: {op.kind} without its attribute")
    return value


def _worked_dims(op: Op, rank: int) -> set[int] | None:
    """The dims `op` combines elements along (its result's element there depends on others
    of the dim), or None for an op that is not lifted."""
    op_class = _SCHEMA.get(op.kind, ("", ""))[0]
    if op_class in ("unary", "binary"):
        return set()  # elementwise, select included
    if op_class == "reduce":
        return {_attr(op.dim, op)}
    if op_class == "rms_norm":
        return {rank - 1}
    return None  # matmul, concat, customized: the search's to fuse


def _rebuilt(bg: BlockGraph, op: Op, args: list[Tensor]) -> Tensor:
    """`op` again in `bg`, on `args`, through the graph's public method of its kind."""
    op_class, attribute = _SCHEMA[op.kind]
    if op_class == "reduce":
        return bg.reduce(args[0], _attr(op.dim, op), _attr(op.reduce_kind, op))
    scalar = (_attr(op.scalar, op),) if attribute in ("scalar", "eps") else ()
    return getattr(bg, op.kind)(*args, *scalar)


def _split_dims(graph: KernelGraph) -> list[int] | None:
    """The dims every block can own a slice of, outermost first: no op works along them, and
    every tensor has the dim's full size there or 1 (broadcast, then read whole by every
    block); each output has the full size. None when some op is not lifted."""
    tensors = graph.tensors
    rank = len(tensors[0].shape)
    if any(len(t.shape) != rank for t in tensors):
        return None
    worked: set[int] = set()
    for op in graph.ops:
        if _SCHEMA.get(op.kind, ("",))[0] == "boundary":
            continue
        dims = _worked_dims(op, rank)
        if dims is None:
            return None
        worked |= dims
    found = []
    for d in range(rank):
        size = max(t.shape[d] for t in tensors)
        if d in worked or size == 1:
            continue
        if all(t.shape[d] in (1, size) for t in tensors) and all(
            t.shape[d] == size for t in graph.outputs
        ):
            found.append(d)
    return found


def _grids(graph: KernelGraph, dims: list[int], cores: int) -> list[tuple[int, ...]]:
    """Up to two grids: along the outermost split dim (whole, or its largest divisor within
    MAX_BLOCKS), and when that gives fewer than two blocks per core, along the next split
    dim too, with the fewest blocks that give two per core (or as many as it has)."""
    if not dims:
        return []
    sizes = [max(t.shape[d] for t in graph.tensors) for d in dims]
    first = max(g for g in range(1, min(sizes[0], MAX_BLOCKS) + 1) if sizes[0] % g == 0)
    grids: list[tuple[int, ...]] = [(first,)]
    if len(dims) > 1 and first < 2 * cores:
        divisors = [
            g for g in range(2, sizes[1] + 1) if sizes[1] % g == 0 and first * g <= MAX_BLOCKS
        ]
        enough = [g for g in divisors if first * g >= 2 * cores]
        if enough or divisors:
            grids.append((first, min(enough) if enough else max(divisors)))
    return [g for g in grids if g[0] > 1]


def _lift(graph: KernelGraph, dims: list[int], grid: tuple[int, ...]) -> KernelGraph:
    lifted = KernelGraph()
    inputs = [lifted.new_input(t.shape, t.dtype) for t in graph.inputs]
    bg = BlockGraph(grid=(*grid, *([1] * (3 - len(grid)))))

    def axes_of(t: Tensor) -> tuple[int, int, int]:
        """The tensor dim each grid axis splits in `t` (-1: read whole by every block)."""
        axes = [d if t.shape[d] > 1 else -1 for d in dims[: len(grid)]]
        return (*axes, *([-1] * (3 - len(axes))))  # type: ignore[return-value]

    value = {
        t.id: bg.new_input(k, imap=axes_of(t), fmap=-1)
        for t, k in zip(graph.inputs, inputs, strict=True)
    }
    for op in graph.ops:
        if _SCHEMA[op.kind][0] == "boundary":
            continue
        out = _rebuilt(bg, op, [value[t.id] for t in op.inputs])
        value[op.outputs[0].id] = out
    for t in graph.outputs:
        bg.new_output(value[t.id], omap=axes_of(t), dtype=t.dtype)
    for t in lifted.customized(inputs, bg):
        lifted.mark_output(t)
    return lifted


def lifted(graph: KernelGraph, cores: int) -> list[KernelGraph]:
    """`graph` as one kernel over each of its grids (_grids); [] when it cannot be lifted:
    an op that is not lifted, tensors of different ranks, no dim to split."""
    dims = _split_dims(graph)
    if not dims or not graph.outputs:
        return []
    found = []
    for grid in _grids(graph, dims, cores):
        try:
            found.append(_lift(graph, dims, grid))
        except ValueError:
            # A block graph the IR's rules refuse: no lift on this grid, and the search's own
            # result stands (a lift is an extra, never a reason for the search to fail).
            continue
    return found
