"""Tensor and Op: read-only handles into a KernelGraph or BlockGraph.

A handle is (graph, index); every property reads the C++ graph, so handles stay valid as the
graph grows (graphs only ever append).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from mirage_jax import _core

if TYPE_CHECKING:
    from mirage_jax.ir.graph import BlockGraph, _Graph

# Which attributes an op kind carries; other kinds report None for them.
_SCALAR_KINDS = frozenset({"mul_scalar", "add_scalar", "rms_norm", "accum_rms_last", "select"})
_DIM_KINDS = frozenset({"reduce", "concat"})


class Tensor:
    """A tensor of one graph, named t<id> as in the C++ messages and printouts."""

    __slots__ = ("_graph", "_id")

    def __init__(self, graph: _Graph, tensor_id: int):
        self._graph = graph
        self._id = tensor_id

    @property
    def graph(self) -> _Graph:
        return self._graph

    @property
    def id(self) -> int:
        return self._id

    @property
    def name(self) -> str:
        return f"t{self._id}"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._info().shape)

    @property
    def dtype(self) -> str:
        return self._info().dtype

    @property
    def phase(self) -> str | None:
        """ "invariant", "body" or "epilogue" in a block graph; None in a kernel graph."""
        return self._info().phase if self._graph._is_block else None

    @property
    def producer(self) -> Op:
        return self._graph.ops[self._info().producer]

    def _info(self) -> _core.TensorInfo:
        return self._graph._core.tensor(self._id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        return self._graph is other._graph and self._id == other._id

    def __hash__(self) -> int:
        return hash((id(self._graph), self._id))

    def __repr__(self) -> str:
        phase = f", phase={self.phase!r}" if self._graph._is_block else ""
        return (
            f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype!r}{phase}, "
            f"graph={self._graph.label})"
        )


class Op:
    """An operator of one graph. `kind` is the builder's name ("output" for mark_output)."""

    __slots__ = ("_block_graph", "_graph", "_index", "_info")

    def __init__(self, graph: _Graph, index: int, info: _core.OpInfo):
        self._graph = graph
        self._index = index
        self._info = info  # a C++ copy of the op: ops never change once added
        self._block_graph: BlockGraph | None = None

    @property
    def graph(self) -> _Graph:
        return self._graph

    @property
    def index(self) -> int:
        return self._index

    @property
    def kind(self) -> str:
        return self._info.kind

    @property
    def inputs(self) -> list[Tensor]:
        return [Tensor(self._graph, i) for i in self._info.inputs]

    @property
    def outputs(self) -> list[Tensor]:
        return [Tensor(self._graph, i) for i in self._info.outputs]

    @property
    def scalar(self) -> float | None:
        """The constant of mul_scalar/add_scalar, eps of rms_norm/accum_rms_last, or the fill
        of select."""
        return self._info.scalar if self.kind in _SCALAR_KINDS else None

    @property
    def dim(self) -> int | None:
        """The (non-negative) dim of reduce and concat."""
        return self._info.dim if self.kind in _DIM_KINDS else None

    @property
    def reduce_kind(self) -> str | None:
        return self._info.reduce_kind if self.kind == "reduce" else None

    @property
    def imap(self) -> tuple[int, int, int] | None:
        return _triple(self._info.imap) if self._is_block_io("input") else None

    @property
    def fmap(self) -> int | None:
        return self._info.fmap if self._is_block_io("input") else None

    @property
    def omap(self) -> tuple[int, int, int] | None:
        return _triple(self._info.omap) if self._is_block_io("output") else None

    @property
    def kernel_shape(self) -> tuple[int, ...] | None:
        """Block input/output ops: the shape of the kernel-level tensor they tile."""
        if self._is_block_io("input"):
            core = self._block()._core
            return tuple(core.kernel_input_shape(self._info.io_index))
        if self._is_block_io("output"):
            core = self._block()._core
            return tuple(core.kernel_output_shape(self._info.io_index))
        return None

    @property
    def dtype(self) -> str | None:
        """Block input/output ops: the kernel-level dtype (for outputs, the stored dtype)."""
        if self._is_block_io("input"):
            return self._block()._core.kernel_input_dtype(self._info.io_index)
        if self._is_block_io("output"):
            return self._block()._core.kernel_output_dtype(self._info.io_index)
        return None

    @property
    def block_graph(self) -> BlockGraph | None:
        """A customized op's block graph: a read-only copy (the kernel graph owns its own)."""
        if self.kind != "customized":
            return None
        if self._block_graph is None:
            # graph.py makes the wrapper: it imports this module, so this one cannot import it
            core = cast(_core.BlockGraph, self._info.block_graph)
            self._block_graph = self._graph._read_only_block_graph(core)
        return self._block_graph

    @property
    def fusion_group(self) -> int | None:
        """Block ops: the index of the first op of its thread-level fusion group
        (cc/ir/thread_fusion.h); None for inputs, outputs and kernel-level ops."""
        if not self._graph._is_block:
            return None
        group = self._block()._fusion_groups()[self._index]
        return None if group < 0 else group

    def _is_block_io(self, kind: str) -> bool:
        return self._graph._is_block and self.kind == kind

    def _block(self) -> BlockGraph:
        """The graph, which the caller has checked is a block graph."""
        return cast("BlockGraph", self._graph)

    def __repr__(self) -> str:
        ins = ", ".join(t.name for t in self.inputs)
        outs = ", ".join(t.name for t in self.outputs)
        return f"Op({self._index}: {self.kind}({ins}) -> [{outs}], graph={self._graph.label})"


def _triple(values: list[int]) -> tuple[int, int, int]:
    a, b, c = values
    return a, b, c
