"""The grids and maps a caller may fix in a SearchConfig, as Mirage's griddims, imaps, omaps
and fmaps: their checks, alone (when the config is made) and against a graph (when a search
starts), and their form in the C++ config (cc/search/user_structure.h).

A grid is 1 to 3 block counts, one per grid axis (x, y, z). A map has one entry per grid
axis: the tensor dim that axis splits (imap, for a block graph's inputs) or stores along
(omap, for its outputs), -1 for none; an fmap is the dim a for-loop walks, -1 for none. The
search still builds and verifies every candidate, so these only narrow what it tries: a bad
value is an error here because it would otherwise narrow the search to nothing, silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from mirage_jax.ir import args as _args
from mirage_jax.ir.graph import KernelGraph

MAX_AXES = 3  # x, y, z
FIELDS = ("grids", "imaps", "omaps", "fmaps")


def _where(field: str) -> str:
    return f"SearchConfig: argument '{field}'"


def _sequence(value: object, field: str, what: str) -> Sequence:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{_where(field)} must be {what}, got {type(value).__name__} {value!r}")
    return value


def _tuple_of_ints(value: object, field: str, what: str, minimum: int) -> tuple[int, ...]:
    items = _sequence(value, field, what)
    if not 1 <= len(items) <= MAX_AXES:
        raise ValueError(
            f"{_where(field)} has {len(items)} entries; it needs one per grid axis, 1 to {MAX_AXES}"
        )
    checked = []
    for i, v in enumerate(items):
        number = _args.integer(v, "SearchConfig", f"{field}[{i}]")
        if number < minimum:
            raise ValueError(f"{_where(f'{field}[{i}]')} must be >= {minimum}, got {number}")
        checked.append(number)
    return tuple(checked)


def _non_empty(value: object, field: str, what: str) -> Sequence:
    items = _sequence(value, field, what)
    if not items:
        raise ValueError(f"{_where(field)} is empty; use None to let the search choose")
    return items


def grids(value: object) -> tuple[tuple[int, ...], ...] | None:
    """`value` as a tuple of grids, or None; a TypeError or ValueError naming what is wrong."""
    if value is None:
        return None
    what = "None or a list of grids, each 1 to 3 positive integers"
    items = _non_empty(value, "grids", what)
    return tuple(_tuple_of_ints(g, f"grids[{i}]", what, 1) for i, g in enumerate(items))


def maps(
    value: object, field: str, given_grids: tuple[tuple[int, ...], ...] | None
) -> tuple[tuple[int, ...], ...] | None:
    """`value` as a tuple of imaps or omaps (`field`), or None. With grids given, a map must
    have as many entries as some grid has axes, and split only axes of more than one block
    in some such grid: any other map matches no layout."""
    if value is None:
        return None
    what = "None or a list of maps, each 1 to 3 integers (a tensor dim or -1)"
    items = _non_empty(value, field, what)
    checked = []
    for i, m in enumerate(items):
        where = f"{field}[{i}]"
        entries = _tuple_of_ints(m, where, what, -1)
        split = [d for d in entries if d >= 0]
        if len(set(split)) < len(split):
            raise ValueError(f"{_where(where)} {entries} splits one dim on two grid axes")
        if given_grids is not None:
            _check_map_fits_grids(entries, where, given_grids)
        checked.append(entries)
    return tuple(checked)


def _check_map_fits_grids(
    entries: tuple[int, ...], where: str, given_grids: tuple[tuple[int, ...], ...]
) -> None:
    same = [g for g in given_grids if len(g) == len(entries)]
    if not same:
        axes = sorted({len(g) for g in given_grids})
        raise ValueError(
            f"{_where(where)} {entries} has {len(entries)} entries, but the grids have "
            f"{' or '.join(map(str, axes))} axes (a map has one entry per grid axis)"
        )
    for a, d in enumerate(entries):
        if d >= 0 and all(g[a] == 1 for g in same):
            raise ValueError(
                f"{_where(where)} {entries} splits dim {d} on grid axis {a}, which has one "
                f"block in every grid of {len(entries)} axes (an unsplit axis maps to -1)"
            )


def fmaps(value: object) -> tuple[int, ...] | None:
    """`value` as a tuple of for-loop dims (-1: not walked), or None."""
    if value is None:
        return None
    items = _non_empty(value, "fmaps", "None or a list of integers (a tensor dim or -1)")
    checked = []
    for i, v in enumerate(items):
        number = _args.integer(v, "SearchConfig", f"fmaps[{i}]")
        if number < -1:
            raise ValueError(f"{_where(f'fmaps[{i}]')} must be a dim or -1, got {number}")
        checked.append(number)
    return tuple(checked)


def padded(entries: tuple[int, ...], fill: int) -> tuple[int, int, int]:
    """A grid (fill 1) or map (fill -1) with an entry for each of the three axes."""
    return (*entries, *(fill,) * (MAX_AXES - len(entries)))  # type: ignore[return-value]


# -- against a graph -------------------------------------------------------------------


def check_against(graph: KernelGraph, config) -> None:
    """A ValueError naming the field, the graph's input and the dim when a given map or grid
    can apply to no tensor of `graph`: a dim beyond every tensor's rank, a grid whose block
    count divides no dim (or none of the dims a map gives it). Tensors a rewrite may create
    have the shapes of the graph's own, so a structure none of them takes is a mistake,
    which a search would otherwise answer with only the graph itself."""
    if all(getattr(config, field) is None for field in FIELDS):
        return
    shapes = [t.shape for t in graph.tensors]
    inputs = [t.shape for t in graph.inputs]
    for field in ("imaps", "omaps"):
        for i, entries in enumerate(getattr(config, field) or ()):
            for d in entries:
                _check_dim(d, f"{field}[{i}]", shapes, inputs)
            if config.grids is not None:
                _check_map_divides(entries, f"{field}[{i}]", config.grids, shapes, inputs)
    for i, d in enumerate(config.fmaps or ()):
        _check_dim(d, f"fmaps[{i}]", shapes, inputs)
    for i, grid in enumerate(config.grids or ()):
        for a, blocks in enumerate(grid):
            if blocks > 1 and not any(n % blocks == 0 for s in shapes for n in s):
                raise ValueError(
                    f"{_where(f'grids[{i}]')} {grid} has {blocks} blocks on axis {a}, which "
                    f"divide no dim of the graph's tensors ({_describe(inputs)})"
                )


def _describe(inputs: list[tuple[int, ...]]) -> str:
    return ", ".join(f"input {k} has shape {s}" for k, s in enumerate(inputs))


def _check_dim(d: int, where: str, shapes, inputs) -> None:
    rank = max((len(s) for s in shapes), default=0)
    if d >= rank:
        raise ValueError(
            f"{_where(where)} names dim {d}, but the graph's tensors have at most {rank} dims "
            f"({_describe(inputs)})"
        )


def _check_map_divides(entries, where: str, given_grids, shapes, inputs) -> None:
    def fits(shape, grid) -> bool:
        return all(
            d < 0 or blocks == 1 or (d < len(shape) and shape[d] % blocks == 0)
            for d, blocks in zip(entries, grid, strict=True)
        )

    same = [g for g in given_grids if len(g) == len(entries)]
    if any(fits(s, g) for s in shapes for g in same):
        return
    # The first input and dim that a grid of the map's length does not divide.
    grid = same[0]
    for k, shape in enumerate(inputs):
        for d, blocks in zip(entries, grid, strict=True):
            if d >= 0 and blocks > 1 and d < len(shape) and shape[d] % blocks:
                raise ValueError(
                    f"{_where(where)} {entries} splits dims no tensor of the graph can take "
                    f"under grids {tuple(same)}: input {k} has {shape[d]} at dim {d}, which "
                    f"{blocks} blocks do not divide"
                )
    raise ValueError(
        f"{_where(where)} {entries} splits dims no tensor of the graph can take under grids "
        f"{tuple(same)} ({_describe(inputs)})"
    )
