"""Running a function's optimization where no jax trace is active.

A function is specialized while jax.jit traces it, and every jitted call made under an
active trace (even inside jax.ensure_compile_time_eval) leaves jax's C++ dispatch path: on
the development machine each call then cost 150-400 us more. Every timing of the
optimization (region estimates, candidates against XLA, the whole program against jax.jit)
would carry that constant: a kernel of 0.55 ms against XLA's 1.21 ms was timed as 0.96 ms
against 1.54 ms, and small regions lost their clear wins. jax keeps its trace state per
thread, so the work runs on a thread of its own, which starts with none.

jax keeps its context-manager settings per thread too (`jax.enable_x64`,
`jax.default_matmul_precision`, ...): the caller's are set on the worker, or a region
would be traced, searched and timed under settings the user did not ask for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from jax._src import config as _jax_config

T = TypeVar("T")


def caller_settings() -> dict[Any, Any]:
    """The jax config states this thread has set locally (by their context managers), each
    with its value. Read from jax's registry of states; a jax without one has none."""
    states = getattr(_jax_config, "config_states", {})
    unset = getattr(getattr(_jax_config, "config_ext", None), "unset", None)
    found = {}
    for state in states.values():
        value = state.get_local()
        if value is not unset:
            found[state] = value
    return found


def _adopt(settings: dict[Any, Any]) -> None:
    """Sets `settings` on this thread as their context managers would (the values are parsed
    already, so no parser runs again), hooks included."""
    for state, value in settings.items():
        state.swap_local(value)
        hook = getattr(state, "_update_thread_local_hook", None)
        if hook:
            hook(value)


def call(fn: Callable[..., T], *args: Any) -> T:
    """fn(*args) on a fresh thread under the caller's jax settings, waited for; its
    exception, if any, is raised here. The thread is a daemon: an interrupted caller (Ctrl-C
    during a long search) is not held until the search ends, nor is the interpreter's exit."""
    outcome: list[Any] = []
    settings = caller_settings()

    def work() -> None:
        try:
            _adopt(settings)
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
