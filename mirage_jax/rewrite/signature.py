"""The signature an optimized function is specialized on, as jax.jit's cache key: the pytree
structure of the traced arguments, each leaf's shape, dtype and weak type, and the value of
every static argument."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _array_type():
    return type(jnp.zeros(()))  # jax's concrete array class (ArrayImpl)


_ARRAY_TYPE = None


class Signature:
    """Like jax.jit's cache key: the pytree structure of the traced arguments, each leaf's
    shape, dtype and weak type, and the value of every static argument. `dynamic` holds the
    traced leaves, `avals` their abstract values."""

    def __init__(self, opt, args, kwargs):
        global _ARRAY_TYPE
        if _ARRAY_TYPE is None:
            _ARRAY_TYPE = _array_type()
        name = getattr(opt._fun, "__name__", repr(opt._fun))
        nargs = len(args)
        static_nums = set()
        for i in opt._static_argnums:  # as in jax.jit, those beyond the call's are unused
            j = i + nargs if i < 0 else i
            if 0 <= j < nargs:
                static_nums.add(j)
        static = [(("arg", i), args[i]) for i in sorted(static_nums)]
        static += [(("kwarg", k), kwargs[k]) for k in sorted(kwargs) if k in opt._static_argnames]
        for where, value in static:
            try:
                hash(value)
            except TypeError:
                raise ValueError(
                    f"Non-hashable static arguments are not supported. An error "
                    f"occurred while trying to hash an object of type "
                    f"{type(value)}, {value!r}. The error was: not hashable "
                    f"(static {where[0]} {where[1]!r} of {name})"
                ) from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_nums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in opt._static_argnames}
        leaves, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        described = []
        for i, x in enumerate(leaves):
            if type(x) is _ARRAY_TYPE:  # the common case, without building an aval
                described.append((x.shape, x.dtype, x.weak_type))
                continue
            try:
                aval = jax.typeof(x)
            except (TypeError, AttributeError):
                path = jax.tree_util.tree_flatten_with_path((dyn_args, dyn_kwargs))[0][i][0]
                raise TypeError(
                    f"Error interpreting argument to {name} as an abstract array. The "
                    f"problematic value is of type {type(x)} and was passed to the function "
                    f"at path {jax.tree_util.keystr(path)}. This typically means that a "
                    f"mirage_jax.optimize-wrapped function (like a jax.jit-wrapped one) was "
                    f"called with a non-array argument, and this argument was not marked as "
                    f"static using the static_argnums or static_argnames parameters of "
                    f"mirage_jax.optimize."
                ) from None
            described.append(
                (tuple(aval.shape), aval.dtype, bool(getattr(aval, "weak_type", False)))
            )
        self.dynamic = leaves
        self.described = described
        self.tree = tree
        self.static = static
        self.args, self.kwargs, self.static_nums = args, kwargs, static_nums
        self.key = (tree, tuple(described), tuple(static))

    @property
    def avals(self) -> list:
        return [
            jax.ShapeDtypeStruct(shape, dtype, weak_type=weak)
            for shape, dtype, weak in self.described
        ]

    def rebuild(self, dynamic_values):
        """The call's (args, kwargs) with the traced leaves replaced by `dynamic_values`."""
        dyn_args, dyn_kwargs = jax.tree_util.tree_unflatten(self.tree, dynamic_values)
        it = iter(dyn_args)
        args = [self.args[i] if i in self.static_nums else next(it) for i in range(len(self.args))]
        kwargs = dict(dyn_kwargs)
        kwargs.update({k: self.kwargs[k] for (kind, k), _ in self.static if kind == "kwarg"})
        return args, kwargs
