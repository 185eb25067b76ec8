"""Running a function's optimization where no jax trace is active.

A function is specialized while jax.jit traces it, and every jitted call made under an
active trace (even inside jax.ensure_compile_time_eval) leaves jax's C++ dispatch path: on
the development machine each call then cost 150-400 us more. Every timing of the
optimization (region estimates, candidates against XLA, the whole program against jax.jit)
would carry that constant: a kernel of 0.55 ms against XLA's 1.21 ms was timed as 0.96 ms
against 1.54 ms, and small regions lost their clear wins. jax keeps its trace state per
thread, so the work runs on a thread of its own, which starts with none.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def call(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) on a fresh thread, waited for; its exception, if any, is raised here. The
    thread is a daemon: an interrupted caller (Ctrl-C during a long search) is not held
    until the search ends, nor is the interpreter's exit."""
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as e:  # handed to the caller, raised there
            outcome.append((False, e))

    worker = threading.Thread(target=work, name="mirage_jax-optimize", daemon=True)
    worker.start()
    worker.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
