"""The CPU kernels' one XLA FFI handler (cc/python/cpu_dispatch.cc): a kernel library exports
plain C functions, and the handler, registered once as the target "mirage_jax_cpu", checks
the buffers XLA passes against the kernel's own signature before it calls the kernel."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cache_test_support import build_library
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    random_inputs,
    session_kernel_cache,
)

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import PROGRAMS
from mirage_jax.runtime import ffi_targets
from mirage_jax.runtime.library_probe import KernelLoadError


def registered_kernel():
    """The small RMSNorm+Linear graph compiled (its kernel registered), with its inputs, its
    kernel's name and its output's shape and dtype."""
    program = PROGRAMS["rmsnorm_linear"]
    _, fused = program.build(**program.small)
    (op,) = [op for op in fused.ops if op.kind == "customized"]
    f = mj.compile(fused)
    inputs = random_inputs(fused)
    symbol = mj._core.cpu_kernel_symbol(op.block_graph._core)
    assert ffi_targets.is_registered(symbol)
    out = jax.ShapeDtypeStruct(op.outputs[0].shape, op.outputs[0].dtype)
    return f, inputs, symbol, out


def call(symbol, out, *args):
    return jax.ffi.ffi_call(ffi_targets.CPU_TARGET, out, vmap_method="sequential")(
        *args, kernel=symbol
    )


def test_the_handler_runs_the_kernel_the_attribute_names():
    f, inputs, symbol, out = registered_kernel()
    (expected,) = f(*inputs)
    np.testing.assert_array_equal(np.asarray(call(symbol, out, *inputs)), np.asarray(expected))


def test_a_reshape_of_each_buffer_is_the_same_call():
    """A region hands a kernel its values as the model shaped them (row-major, the bytes of
    the kernel's own shapes)."""
    f, inputs, symbol, out = registered_kernel()
    (expected,) = f(*inputs)
    reshaped = [x.reshape(-1) for x in inputs]
    flat_out = jax.ShapeDtypeStruct((int(np.prod(out.shape)),), out.dtype)
    got = call(symbol, flat_out, *reshaped)
    np.testing.assert_array_equal(np.asarray(got).reshape(out.shape), np.asarray(expected))


def test_buffers_of_another_shape_or_dtype_are_an_error_naming_the_kernel():
    _, inputs, symbol, out = registered_kernel()
    with pytest.raises(
        Exception,
        match=rf"{symbol}: input 0 must have shape \[2, 16\] \(or a reshape of it\) and dtype "
        r"float32, got \[1, 16\]",
    ):
        call(symbol, out, inputs[0][:1], *inputs[1:]).block_until_ready()
    with pytest.raises(
        Exception, match=rf"{symbol}: input 2 .* dtype float32, got \[16, 12\] float16"
    ):
        call(symbol, out, *inputs[:2], inputs[2].astype(jnp.float16)).block_until_ready()
    wrong_out = jax.ShapeDtypeStruct((out.shape[0], out.shape[1] + 1), out.dtype)
    with pytest.raises(Exception, match=rf"{symbol}: output 0 must have shape"):
        call(symbol, wrong_out, *inputs).block_until_ready()
    with pytest.raises(Exception, match=r"expected 3 inputs and 1 outputs"):
        call(symbol, out, *inputs[:2]).block_until_ready()


def test_a_kernel_never_registered_is_an_error_not_a_call():
    _, inputs, _, out = registered_kernel()
    with pytest.raises(Exception, match="mj_cpu_unknown is not registered in this process"):
        call("mj_cpu_unknown", out, *inputs).block_until_ready()


SIGNATURE_LIBRARY = """
#include <cstdint>
extern "C" __attribute__((visibility("default"))) void {name}(const void*, void* const*) {{}}
{signature}
"""


@pytest.mark.parametrize(
    "signature,error",
    [
        ("", "has no signature 'mj_cpu_sig_{case}_signature'"),
        ("{{99, 1, 1, 0, 1, 4, 0, 1, 4}}", "unreadable signature: version 99"),
        ("{{1, 1, 0}}", "unreadable signature: buffer counts"),
        ("{{1, 1, 1, 7, 1, 4, 0, 1, 4}}", "unreadable signature: buffer 0"),
        ("{{1, 1, 1, 0, 99, 4, 0, 1, 4}}", "unreadable signature: buffer 0"),
    ],
)
def test_a_library_whose_signature_cannot_be_read_is_not_registered(tmp_path, signature, error):
    case = abs(hash(signature)) % 10**8
    name = f"mj_cpu_sig_{case}"
    exported = (
        f'extern "C" __attribute__((visibility("default"))) const int64_t* {name}_signature() '
        f"{{ static const int64_t words[] = {signature.format()}; return words; }}"
        if signature
        else ""
    )
    library = build_library(
        SIGNATURE_LIBRARY.format(name=name, signature=exported), tmp_path / "kernel.so"
    )
    with pytest.raises(KernelLoadError, match=error.format(case=case)):
        ffi_targets.register_target(name, library, "cpu")
    assert not ffi_targets.is_registered(name)


# A grid of `tasks` tasks, each writing 2·x + 1 into its 16 elements of y, the odd ones after
# sleeping `sleep_us`: the dispatcher's caller must wait for every task a pool worker took,
# whether the worker finishes while the caller still spins or only after it went to sleep.
GRID_LIBRARY = """
#include <chrono>
#include <cstdint>
#include <thread>
extern "C" {{
typedef void (*MjCpuTaskFn)(const void* io, float* arena, int64_t task);
struct MjCpuGridV1 {{
  void* context;
  void (*run)(void* context, MjCpuTaskFn task, const void* io, int64_t tasks, int64_t arena);
}};
}}
struct Io {{ const float* x; float* y; }};
static void task(const void* io, float*, int64_t t) {{
  const Io& b = *static_cast<const Io*>(io);
  if (t % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds({sleep_us}));
  for (int i = 0; i < 16; ++i) b.y[t * 16 + i] = 2 * b.x[t * 16 + i] + 1;
}}
extern "C" __attribute__((visibility("default")))
void {name}(const MjCpuGridV1* grid, void* const* buffers) {{
  const Io io{{static_cast<const float*>(buffers[0]), static_cast<float*>(buffers[1])}};
  grid->run(grid->context, &task, &io, {tasks}, 16);
}}
extern "C" __attribute__((visibility("default"))) const int64_t* {name}_signature() {{
  static const int64_t words[] = {{1, 1, 1, 0, 1, {elements}, 0, 1, {elements}}};
  return words;
}}
"""


@pytest.mark.parametrize("tasks,sleep_us", [(2, 0), (8, 0), (8, 30), (8, 3000), (64, 300)])
def test_every_task_is_done_when_the_kernel_returns(tmp_path, tasks, sleep_us):
    name = f"mj_cpu_grid_{tasks}_{sleep_us}"
    source = GRID_LIBRARY.format(name=name, tasks=tasks, sleep_us=sleep_us, elements=16 * tasks)
    ffi_targets.register_target(name, build_library(source, tmp_path / "grid.so"), "cpu")
    out = jax.ShapeDtypeStruct((16 * tasks,), jnp.float32)
    f = jax.jit(lambda x: call(name, out, x))
    for seed in range(20):
        x = np.random.default_rng(seed).standard_normal(16 * tasks).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(f(x)), 2 * x + 1)
