"""KernelGraph and BlockGraph: builders over the C++ μGraph IR (docs/ir-semantics.md).

The C++ graph (mirage_jax._core) works on integer tensor ids and enforces every IR rule,
raising mirage_jax.IRError. These wrappers hand out Tensor handles, check that handles
belong to the graph they are used with, and check Python argument types.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from mirage_jax import _core as cpp  # the C++ graphs (not `_core`: the graphs' attribute)
from mirage_jax.ir import args as _args
from mirage_jax.ir import evaluate as _evaluate
from mirage_jax.ir import json as _json
from mirage_jax.ir.handles import Op, Tensor

_serials = itertools.count(1)


class _Graph:
    """What both levels share: tensors, ops, and the ops legal at both levels."""

    _is_block = False
    _core: cpp.KernelGraph | cpp.BlockGraph

    def __init__(self, core: cpp.KernelGraph | cpp.BlockGraph):
        self._core = core
        self._serial = next(_serials)
        self._ops_cache: list[Op] = []

    # -- reading back ------------------------------------------------------------------

    @property
    def label(self) -> str:
        """A name for messages, unique within the process: "KernelGraph#3"."""
        return f"{type(self).__name__}#{self._serial}"

    @property
    def ops(self) -> list[Op]:
        for index in range(len(self._ops_cache), self._core.num_ops()):
            self._ops_cache.append(Op(self, index, self._core.op(index)))
        return list(self._ops_cache)

    @property
    def inputs(self) -> list[Tensor]:
        return [Tensor(self, i) for i in self._core.input_ids()]

    @property
    def outputs(self) -> list[Tensor]:
        return [Tensor(self, i) for i in self._core.output_ids()]

    @property
    def tensors(self) -> list[Tensor]:
        return [Tensor(self, i) for i in range(self._core.num_tensors())]

    def hash(self) -> str:
        """The C++ canonical content hash: 32 hex chars, independent of the order in which
        independent ops were added."""
        return self._core.hash()

    def __str__(self) -> str:
        return self._core.to_string()

    # -- shared builders ---------------------------------------------------------------

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("add", a, b)

    def sub(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("sub", a, b)

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("mul", a, b)

    def div(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("div", a, b)

    def exp(self, x: Tensor) -> Tensor:
        return self._unary("exp", x)

    def square(self, x: Tensor) -> Tensor:
        return self._unary("square", x)

    def sqrt(self, x: Tensor) -> Tensor:
        return self._unary("sqrt", x)

    def rsqrt(self, x: Tensor) -> Tensor:
        return self._unary("rsqrt", x)

    def silu(self, x: Tensor) -> Tensor:
        return self._unary("silu", x)

    def gelu(self, x: Tensor) -> Tensor:
        """The tanh approximation, as jax.nn.gelu's default."""
        return self._unary("gelu", x)

    def gelu_erf(self, x: Tensor) -> Tensor:
        """0.5 x erfc(-x / sqrt(2)), as jax.nn.gelu(approximate=False)."""
        return self._unary("gelu_erf", x)

    def relu(self, x: Tensor) -> Tensor:
        return self._unary("relu", x)

    def erf(self, x: Tensor) -> Tensor:
        """The error function, as lax.erf: erf(NaN) = NaN, erf(±inf) = ±1."""
        return self._unary("erf", x)

    def erfc(self, x: Tensor) -> Tensor:
        """1 - erf(x), computed whole as lax.erfc (no cancellation for large x)."""
        return self._unary("erfc", x)

    def sigmoid(self, x: Tensor) -> Tensor:
        return self._unary("sigmoid", x)

    def neg(self, x: Tensor) -> Tensor:
        return self._unary("neg", x)

    def recip(self, x: Tensor) -> Tensor:
        return self._unary("recip", x)

    def mul_scalar(self, x: Tensor, c: float) -> Tensor:
        return self._unary("mul_scalar", x, _args.scalar(c, "mul_scalar", "c"))

    def add_scalar(self, x: Tensor, c: float) -> Tensor:
        return self._unary("add_scalar", x, _args.scalar(c, "add_scalar", "c"))

    def select(self, x: Tensor, mask: Tensor, c: float) -> Tensor:
        """x where mask is nonzero, else the constant c: jnp.where(mask, x, c) for a boolean
        mask given as 0/1. Exact: a NaN or inf of x where the mask is 0 does not reach the
        result."""
        ix, im = self._id(x, "select", "x"), self._id(mask, "select", "mask")
        fill = _args.scalar(c, "select", "c")
        return self._tensor(self._core.binary("select", ix, im, fill))

    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        ia, ib = self._id(a, "matmul", "a"), self._id(b, "matmul", "b")
        return self._tensor(self._core.matmul(ia, ib))

    def reduce(self, x: Tensor, dim: int, kind: str = "sum") -> Tensor:
        """Reduces `dim` (negative counts from the end) by sum, mean or max; keeps it as 1."""
        ix = self._id(x, "reduce", "x")
        dim = _args.integer(dim, "reduce", "dim")
        kind = _args.choice(kind, ("sum", "mean", "max"), "reduce", "kind")
        return self._tensor(self._core.reduce(ix, dim, kind))

    def rms_norm(self, x: Tensor, eps: float = 1e-6) -> Tensor:
        """x / sqrt(mean(x^2, last dim) + eps)."""
        ix = self._id(x, "rms_norm", "x")
        return self._tensor(self._core.rms_norm(ix, _args.scalar(eps, "rms_norm", "eps")))

    def concat(self, a: Tensor, b: Tensor, dim: int) -> Tensor:
        ia, ib = self._id(a, "concat", "a"), self._id(b, "concat", "b")
        dim = _args.integer(dim, "concat", "dim")
        return self._tensor(self._core.concat(ia, ib, dim))

    # -- helpers -----------------------------------------------------------------------

    def _unary(self, kind: str, x: Tensor, scalar: float = 0.0) -> Tensor:
        return self._tensor(self._core.unary(kind, self._id(x, kind, "x"), scalar))

    def _binary(self, kind: str, a: Tensor, b: Tensor) -> Tensor:
        ia, ib = self._id(a, kind, "a"), self._id(b, kind, "b")
        return self._tensor(self._core.binary(kind, ia, ib))

    def _tensor(self, tensor_id: int) -> Tensor:
        return Tensor(self, tensor_id)

    def _id(self, t: object, op: str, arg: str) -> int:
        """The id of `t`, which must be a Tensor of this graph."""
        self._check_writable(op)
        if not isinstance(t, Tensor):
            raise TypeError(
                f"{op}: argument '{arg}' must be a mirage_jax Tensor, got {type(t).__name__} {t!r}"
            )
        if t.graph is not self:
            raise ValueError(
                f"{op}: argument '{arg}' is tensor {t.name} of {t.graph.label}, "
                f"but this op is being added to {self.label}; a tensor can only be used in "
                f"the graph that made it"
            )
        return t.id

    def _check_writable(self, op: str) -> None:
        pass

    @staticmethod
    def _read_only_block_graph(core: cpp.BlockGraph) -> BlockGraph:
        """Wraps a C++ copy of a customized op's block graph (Op.block_graph)."""
        return BlockGraph._read_only(core)

    def __repr__(self) -> str:
        return (
            f"<{self.label}: {len(self._core.input_ids())} inputs, "
            f"{self._core.num_ops()} ops, {len(self._core.output_ids())} outputs>"
        )


class KernelGraph(_Graph):
    """The whole program: predefined ops over whole tensors, and customized ops that run a
    BlockGraph on every block of a grid."""

    _core: cpp.KernelGraph

    def __init__(self) -> None:
        super().__init__(cpp.KernelGraph())

    @classmethod
    def _wrap(cls, core: cpp.KernelGraph) -> KernelGraph:
        """Wraps a C++ kernel graph this handle will own, such as a search candidate."""
        graph = cls.__new__(cls)
        _Graph.__init__(graph, core)
        return graph

    def new_input(self, shape: Sequence[int], dtype: str = "float32") -> Tensor:
        shape = _args.shape(shape, "new_input")
        dtype = _args.dtype(dtype, "new_input")
        return self._tensor(self._core.new_input(list(shape), dtype))

    def customized(self, inputs: Sequence[Tensor], block_graph: BlockGraph) -> tuple[Tensor, ...]:
        """Adds a graph-defined op. `inputs` are this graph's tensors in the block graph's
        input order. The block graph is copied, so later edits to it do not change this op.
        Returns the kernel-level outputs, in the block graph's output order."""
        if not isinstance(block_graph, BlockGraph):
            raise TypeError(
                f"customized: argument 'block_graph' must be a mirage_jax BlockGraph, "
                f"got {type(block_graph).__name__}"
            )
        if isinstance(inputs, Tensor) or not isinstance(inputs, Sequence):
            raise TypeError(
                f"customized: argument 'inputs' must be a list of Tensors, "
                f"got {type(inputs).__name__}"
            )
        ids = [self._id(t, "customized", f"inputs[{i}]") for i, t in enumerate(inputs)]
        return tuple(self._tensor(i) for i in self._core.customized(ids, block_graph._core))

    def mark_output(self, t: Tensor) -> None:
        """Marks `t` as the next program output (any tensor, inputs included)."""
        self._core.mark_output(self._id(t, "mark_output", "t"))

    def evaluate(self, inputs: Sequence[Any], dtype: str = "float64") -> list[np.ndarray]:
        """Runs the reference interpreter: one numpy-convertible array per input, in order;
        returns one numpy array of `dtype` per output."""
        return _evaluate.evaluate(self, inputs, dtype)

    def to_json(self) -> str:
        return _json.kernel_graph_to_json(self)

    @staticmethod
    def from_json(text: str | bytes) -> KernelGraph:
        return _json.kernel_graph_from_json(text, KernelGraph)


class BlockGraph(_Graph):
    """What one block of a grid computes on its tiles, with a for-loop of `forloop_range`
    iterations whose accumulators feed the epilogue (docs/ir-semantics.md)."""

    _is_block = True
    _core: cpp.BlockGraph

    def __init__(self, grid: Sequence[int] = (1, 1, 1), forloop_range: int = 1):
        grid = _args.triple(grid, "BlockGraph", "grid")
        forloop_range = _args.integer(forloop_range, "BlockGraph", "forloop_range")
        super().__init__(cpp.BlockGraph(grid, forloop_range))
        self._writable = True
        self._fusion_cache: tuple[int, list[int]] | None = None

    @classmethod
    def _read_only(cls, core: cpp.BlockGraph) -> BlockGraph:
        """Wraps a C++ copy read back from a customized op."""
        bg = cls.__new__(cls)
        _Graph.__init__(bg, core)
        bg._writable = False
        bg._fusion_cache = None
        return bg

    @property
    def grid(self) -> tuple[int, int, int]:
        x, y, z = self._core.grid
        return x, y, z

    @property
    def forloop_range(self) -> int:
        return self._core.forloop_range

    @property
    def num_blocks(self) -> int:
        return self._core.num_blocks

    def new_input(self, kernel_tensor: Tensor, imap: Sequence[int], fmap: int) -> Tensor:
        """A tile of a kernel-level tensor: grid axis a splits dim imap[a] (-1 replicates),
        the for-loop splits dim fmap (-1: the same tile every iteration)."""
        if not isinstance(kernel_tensor, Tensor):
            raise TypeError(
                f"new_input: argument 'kernel_tensor' must be a mirage_jax Tensor of a "
                f"KernelGraph, got {type(kernel_tensor).__name__} {kernel_tensor!r}"
            )
        if kernel_tensor.graph._is_block:
            raise ValueError(
                f"new_input: argument 'kernel_tensor' is tensor {kernel_tensor.name} of "
                f"{kernel_tensor.graph.label}, a block graph; block inputs tile kernel tensors"
            )
        return self._new_input(kernel_tensor.shape, kernel_tensor.dtype, imap, fmap)

    def _new_input(
        self, kernel_shape: Sequence[int], dtype: object, imap: Sequence[int], fmap: int
    ) -> Tensor:
        """new_input from a shape and dtype, for rebuilding a graph without its kernel graph."""
        self._check_writable("new_input")
        shape = _args.shape(kernel_shape, "new_input", "kernel_shape")
        name = _args.dtype(dtype, "new_input")
        checked_imap = _args.triple(imap, "new_input", "imap")
        checked_fmap = _args.integer(fmap, "new_input", "fmap")
        return self._tensor(self._core.new_input(list(shape), name, checked_imap, checked_fmap))

    def new_output(self, t: Tensor, omap: Sequence[int], dtype: str | None = None) -> None:
        """Stores epilogue tile `t`; grid axis a places it along dim omap[a]. The kernel-level
        output has `dtype` (default: t's dtype)."""
        tid = self._id(t, "new_output", "t")
        omap = _args.triple(omap, "new_output", "omap")
        dtype = t.dtype if dtype is None else _args.dtype(dtype, "new_output")
        self._core.new_output(tid, omap, dtype)

    def accum_sum(self, x: Tensor) -> Tensor:
        """The sum over for-loop iterations."""
        return self._accum("accum_sum", x)

    def accum_sum_last(self, x: Tensor) -> Tensor:
        """The sum over iterations and over the last dim (which becomes 1)."""
        return self._accum("accum_sum_last", x)

    def accum_mean_last(self, x: Tensor) -> Tensor:
        """accum_sum_last / (forloop_range * tile last dim)."""
        return self._accum("accum_mean_last", x)

    def accum_rms_last(self, x: Tensor, eps: float = 0.0) -> Tensor:
        """sqrt(mean over iterations and last dim of x^2 + eps)."""
        eps = _args.scalar(eps, "accum_rms_last", "eps")
        return self._accum("accum_rms_last", x, eps)

    def accum_max_last(self, s: Tensor) -> Tensor:
        """M(s): the max of s over the last dim across all iterations."""
        return self._accum("accum_max_last", s)

    def accum_exp_sum_last(self, s: Tensor) -> Tensor:
        """The sum over iterations and last dim of exp(s - M(s))."""
        return self._accum("accum_exp_sum_last", s)

    def accum_exp_matmul(self, s: Tensor, v: Tensor) -> Tensor:
        """The sum over iterations of exp(s - M(s)) @ v."""
        i_s = self._id(s, "accum_exp_matmul", "s")
        i_v = self._id(v, "accum_exp_matmul", "v")
        return self._tensor(self._core.accum_exp_matmul(i_s, i_v))

    def _accum(self, kind: str, x: Tensor, scalar: float = 0.0) -> Tensor:
        return self._tensor(self._core.accum(kind, self._id(x, kind, "x"), scalar))

    def _fusion_groups(self) -> list[int]:
        num_ops = self._core.num_ops()
        if self._fusion_cache is None or self._fusion_cache[0] != num_ops:
            self._fusion_cache = (num_ops, self._core.fusion_groups())
        return self._fusion_cache[1]

    def _check_writable(self, op: str) -> None:
        if not self._writable:
            raise ValueError(
                f"{op}: {self.label} was read back from a customized op and is read-only; "
                f"build a new BlockGraph instead"
            )

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, grid={self.grid}, forloop_range={self.forloop_range}>"
