"""Lossless JSON for kernel graphs, block graphs nested inside.

A graph is written as its ops in order, each with its kind, the ids of its input and output
tensors, and exactly the attributes its kind carries. Reading replays the builder calls in
that order, so the C++ core re-checks every rule and the rebuilt graph is identical (same
tensor ids, same to_json, same hash). Floats are written by Python's json, which round-trips
them exactly.

graph.py's KernelGraph.to_json/from_json call these; this module does not import graph.py
(the graph classes it rebuilds are passed in), so that the two do not import each other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mirage_jax.ir.graph import BlockGraph, KernelGraph, _Graph
    from mirage_jax.ir.handles import Op, Tensor

_T = TypeVar("_T")
# A JSON object as json.loads returns it.
JsonObject = dict[str, Any]

FORMAT = "mirage_jax.kernel_graph"
VERSION = 1

_UNARY = ("exp", "square", "sqrt", "rsqrt", "silu", "gelu", "relu", "sigmoid", "neg", "recip")
_BINARY = ("add", "sub", "mul", "div", "matmul")
_SHARED_ATTRS = {
    **dict.fromkeys(_UNARY + _BINARY, ()),
    "mul_scalar": ("scalar",),
    "add_scalar": ("scalar",),
    "reduce": ("dim", "reduce_kind"),
    "rms_norm": ("scalar",),
    "concat": ("dim",),
}
# kind -> the attribute keys its JSON object carries, per level.
_KERNEL_ATTRS = {
    **_SHARED_ATTRS,
    "input": ("shape", "dtype"),
    "customized": ("block_graph",),
    "output": (),
}
_BLOCK_ATTRS = {
    **_SHARED_ATTRS,
    "input": ("shape", "dtype", "imap", "fmap"),
    "output": ("omap", "dtype"),
    "accum_sum": (),
    "accum_sum_last": (),
    "accum_mean_last": (),
    "accum_rms_last": ("scalar",),
    "accum_max_last": (),
    "accum_exp_sum_last": (),
    "accum_exp_matmul": (),
}
# How many input tensors each kind takes; customized takes any number.
_TWO_INPUTS = frozenset({"add", "sub", "mul", "div", "matmul", "concat", "accum_exp_matmul"})


def _arity(kind: str) -> int | None:
    if kind == "customized":
        return None
    return 0 if kind == "input" else 2 if kind in _TWO_INPUTS else 1


# -- writing -----------------------------------------------------------------------------


def kernel_graph_to_json(graph: KernelGraph) -> str:
    doc = {"format": FORMAT, "version": VERSION, "ops": _ops_to_json(graph, _KERNEL_ATTRS)}
    return json.dumps(doc)


def _block_graph_to_json(graph: BlockGraph) -> JsonObject:
    return {
        "grid": list(graph.grid),
        "forloop_range": graph.forloop_range,
        "ops": _ops_to_json(graph, _BLOCK_ATTRS),
    }


def _ops_to_json(graph: _Graph, attrs_of: dict[str, tuple[str, ...]]) -> list[JsonObject]:
    return [_op_to_json(op, attrs_of[op.kind]) for op in graph.ops]


def _op_to_json(op: Op, attrs: tuple[str, ...]) -> JsonObject:
    obj: JsonObject = {"kind": op.kind}
    if op.kind != "input":
        obj["inputs"] = [t.id for t in op.inputs]
    if op.kind != "output":
        obj["outputs"] = [t.id for t in op.outputs]
    for key in attrs:
        obj[key] = _attr_to_json(op, key)
    return obj


def _attr_to_json(op: Op, key: str) -> Any:
    if key == "shape":
        shape = op.kernel_shape if op.graph._is_block else op.outputs[0].shape
        return list(shape or ())
    if key == "dtype":
        return op.dtype if op.graph._is_block else op.outputs[0].dtype
    if key == "block_graph":
        assert op.block_graph is not None  # a customized op's
        return _block_graph_to_json(op.block_graph)
    value = getattr(op, key)
    return list(value) if isinstance(value, tuple) else value


# -- reading -----------------------------------------------------------------------------


def kernel_graph_from_json(
    text: str | bytes, kernel_graph: type[KernelGraph], block_graph: type[BlockGraph]
) -> KernelGraph:
    """The graph `text` records, rebuilt as a `kernel_graph` whose customized ops hold
    `block_graph`s."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise TypeError(f"from_json: expected a JSON string, got {type(text).__name__}")
    try:
        doc = json.loads(text)
    except ValueError as e:  # JSONDecodeError and bad UTF-8 both
        raise ValueError(f"from_json: not valid JSON: {e}") from None
    _expect(isinstance(doc, dict), "the document", "must be a JSON object")
    _expect(
        doc.get("format") == FORMAT,
        "the document",
        f"has format {doc.get('format')!r}, expected {FORMAT!r}",
    )
    _expect(
        doc.get("version") == VERSION,
        "the document",
        f"has version {doc.get('version')!r}; this reader supports version {VERSION}",
    )
    _check_keys(doc, {"format", "version", "ops"}, "the document")
    graph = kernel_graph()
    _replay_ops(graph, doc["ops"], _KERNEL_ATTRS, "ops", block_graph)
    return graph


def _block_graph_from_json(obj: Any, where: str, block_graph: type[BlockGraph]) -> BlockGraph:
    _expect(isinstance(obj, dict), where, "must be a JSON object")
    _check_keys(obj, {"grid", "forloop_range", "ops"}, where)
    graph = _call(lambda: block_graph(obj["grid"], obj["forloop_range"]), where)
    _replay_ops(graph, obj["ops"], _BLOCK_ATTRS, f"{where}.ops", block_graph)
    return graph


def _replay_ops(
    graph: _Graph,
    ops: Any,
    attrs_of: dict[str, tuple[str, ...]],
    where: str,
    block_graph: type[BlockGraph],
) -> None:
    _expect(isinstance(ops, list), where, "must be a list of ops")
    tensors: dict[int, Tensor] = {}  # recorded tensor id -> the rebuilt Tensor
    for index, obj in enumerate(ops):
        at = f"{where}[{index}]"
        _expect(isinstance(obj, dict), at, "must be a JSON object")
        kind = obj.get("kind")
        _expect(kind in attrs_of, at, f"has unknown kind {kind!r} for a {type(graph).__name__}")
        at = f"{at} ({kind})"
        attrs = attrs_of[kind]
        keys = {"kind", *attrs}
        keys |= set() if kind == "input" else {"inputs"}
        keys |= set() if kind == "output" else {"outputs"}
        _check_keys(obj, keys, at)
        inputs = [_lookup(tensors, i, at) for i in _id_list(obj, "inputs", at)]
        arity = _arity(kind)
        _expect(
            arity is None or len(inputs) == arity, at, f"has {len(inputs)} inputs, expected {arity}"
        )
        values = {key: obj[key] for key in attrs}
        if kind == "customized":
            values["block_graph"] = _block_graph_from_json(
                obj["block_graph"], f"{at}.block_graph", block_graph
            )
        results = _call(lambda: _build(graph, kind, inputs, values), at)  # noqa: B023 (run now)
        recorded = _id_list(obj, "outputs", at)
        _expect(
            len(recorded) == len(results),
            at,
            f"records {len(recorded)} outputs but the op has {len(results)}",
        )
        for recorded_id, tensor in zip(recorded, results):
            _expect(recorded_id not in tensors, at, f"redefines tensor id {recorded_id}")
            tensors[recorded_id] = tensor


def _build(graph: Any, kind: str, inputs: list[Tensor], values: JsonObject) -> list[Tensor]:
    """One builder call on `graph` (a KernelGraph or BlockGraph); returns the new tensors
    (none for outputs)."""
    block = graph._is_block
    if kind == "input":
        if block:
            v = values
            return [graph._new_input(v["shape"], v["dtype"], v["imap"], v["fmap"])]
        return [graph.new_input(values["shape"], values["dtype"])]
    if kind == "output":
        if block:
            graph.new_output(*inputs, values["omap"], values["dtype"])
        else:
            graph.mark_output(*inputs)
        return []
    if kind == "customized":
        return list(graph.customized(inputs, values["block_graph"]))
    if kind == "reduce":
        return [graph.reduce(*inputs, values["dim"], values["reduce_kind"])]
    if kind == "concat":
        return [graph.concat(*inputs, values["dim"])]
    return [getattr(graph, kind)(*inputs, *values.values())]


# -- checks ------------------------------------------------------------------------------


def _expect(condition: bool, where: str, problem: str) -> None:
    if not condition:
        raise ValueError(f"from_json: {where} {problem}")


def _check_keys(obj: JsonObject, expected: set[str], where: str) -> None:
    missing = sorted(expected - obj.keys())
    unexpected = sorted(obj.keys() - expected)
    _expect(not missing, where, f"is missing {', '.join(map(repr, missing))}")
    _expect(not unexpected, where, f"has unexpected {', '.join(map(repr, unexpected))}")


def _id_list(obj: JsonObject, key: str, where: str) -> list[int]:
    ids: list[int] = obj.get(key, [])
    ok = isinstance(ids, list) and all(type(i) is int for i in ids)
    _expect(ok, where, f"'{key}' must be a list of integer tensor ids, got {ids!r}")
    return ids


def _lookup(tensors: dict[int, Tensor], tensor_id: int, where: str) -> Tensor:
    _expect(
        tensor_id in tensors,
        where,
        f"uses tensor id {tensor_id}, which no earlier op of this graph defines",
    )
    return tensors[tensor_id]


def _call(build: Callable[[], _T], where: str) -> _T:
    """Runs a builder, turning its errors (IRError or argument checks) into ValueError."""
    try:
        return build()
    except (TypeError, ValueError) as e:
        raise ValueError(f"from_json: {where}: {e}") from None
