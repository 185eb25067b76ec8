"""optimize(background=True): the first call of a signature runs jax.jit of the function at
once, and the signature is optimized on a worker thread; later calls switch to the rewritten
program when it is ready.

Threading model: one daemon worker thread per optimized function runs the specializations
one at a time, in the order their signatures were first called. The caller's thread never
waits on it. A call picks its program when it starts: jax.jit of the function until the
signature's specialization is published, the optimized jit after (which runs the rewritten
program only where it won, else the function itself), so no call ever changes programs
midway. The worker specializes by tracing the optimized jit itself, so the specialization
lands under the key the caller's later trace looks up. Whatever fails on the worker
becomes a warning and plain jax.jit for that signature, never an exception in a call.
Timing on the worker shares the machine with the caller's own calls: a background verdict
is as noisy as the load, and verdicts stored in the cache keep later processes from
re-deciding it.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import jax

from mirage_jax.rewrite.signature import Signature


def describe_signature(key: Any) -> str:
    """A signature's key, readable: "f32[8,256], f32[256]" (static arguments appended)."""
    _, described, static = key
    parts = [f"{dtype}{list(shape)}" for shape, dtype, _ in described]
    parts += [f"{where[1]}={value!r}" for where, value in static]
    return ", ".join(parts) or "()"


class Background:
    """The background specializations of one Optimized."""

    def __init__(self, opt: Any):
        self._opt = opt
        self._lock = threading.Lock()
        self._futures: dict[Any, Future] = {}
        self._failed: dict[Any, str] = {}
        self._worker = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"mirage_jax-{opt.__name__}"
        )

    def call(self, args: tuple, kwargs: dict) -> Any:
        opt = self._opt
        try:
            sig = Signature(opt, args, kwargs)
        except Exception:  # jax.jit raises the user's error in its own words
            return opt._plain_call(*args, **kwargs)
        key = sig.key
        future = self._futures.get(key)
        if future is not None and future.done() and key not in self._failed:
            return opt._rewritten_jit()(*args, **kwargs)
        if future is not None:
            return opt._plain_call(*args, **kwargs)
        abstract = sig.rebuild(sig.avals)  # before the call, which may donate its arrays
        result = opt._plain_call(*args, **kwargs)  # the user's errors stop here, in their thread
        with self._lock:
            if key not in self._futures:
                abstract_args, abstract_kwargs = abstract
                self._futures[key] = self._worker.submit(
                    self._specialize, key, abstract_args, abstract_kwargs, result
                )
        return result

    def _specialize(self, key: Any, args: list, kwargs: dict, first_result: Any) -> None:
        opt = self._opt
        # The first call's own computation runs first: on a machine of few cores the worker
        # would otherwise slow down the very call it exists to keep fast.
        with contextlib.suppress(Exception):  # a donated or deleted result: nothing to wait on
            jax.block_until_ready(first_result)
        del first_result
        try:
            # Tracing the optimized jit runs the specialization inside its trace, as a
            # first call would, and leaves it under the trace's own key.
            opt._rewritten_jit().trace(*args, **kwargs)
        except Exception as e:
            reason = f"{type(e).__name__}: {e}"
            self._failed[key] = reason
            name = getattr(opt._fun, "__qualname__", repr(opt._fun))
            warnings.warn(
                f"mirage_jax.optimize: background optimization of {name} failed, it runs as "
                f"jax.jit: {reason}",
                RuntimeWarning,
                stacklevel=1,
            )

    def wait(self, timeout: float | None) -> bool:
        with self._lock:
            futures = list(self._futures.values())
        _, pending = wait(futures, timeout=timeout)
        return not pending

    def states(self) -> dict[str, str]:
        out = {}
        for key, future in list(self._futures.items()):
            if key in self._failed:
                out[describe_signature(key)] = f"failed: {self._failed[key]}"
            elif not future.done():
                out[describe_signature(key)] = "optimizing"
        return out
