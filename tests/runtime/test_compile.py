"""mj.compile and mj.generate_code: lowering a KernelGraph to jax (predefined ops as lax
ops, customized ops as one FFI custom call each), backends, and argument checks."""

import re
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    assert_close,
    random_inputs,
    session_kernel_cache,
    storage_rtol,
)

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import PROGRAMS
from mirage_jax.runtime import compile as runtime_compile
from mirage_jax.runtime import toolchain


def small(name):
    program = PROGRAMS[name]
    return program.build(**program.small)


def custom_call_targets(hlo_text: str) -> list[str]:
    """The kernel of each custom call: CPU kernels are all called through the target
    mirage_jax_cpu, which the call's `kernel` attribute tells which one to run."""
    targets = []
    for line in hlo_text.splitlines():
        call = re.search(r"custom_call @(\w+)", line)
        if call:
            kernel = re.search(r'kernel = "(\w+)"', line)
            targets.append(kernel.group(1) if kernel else call.group(1))
    return targets


@pytest.mark.parametrize("name,kernels", [("rmsnorm_linear", 1), ("gqa_prefill", 2)])
def test_lowered_hlo_has_one_custom_call_per_customized_op(name, kernels):
    _, fused = small(name)
    inputs = random_inputs(fused)
    targets = custom_call_targets(jax.jit(mj.compile(fused)).lower(*inputs).as_text())
    symbols = [
        mj._core.cpu_kernel_symbol(op.block_graph._core)
        for op in fused.ops
        if op.kind == "customized"
    ]
    assert targets == symbols
    assert len(targets) == kernels


def test_reference_graph_lowers_to_no_custom_call():
    ref, _ = small("gated_mlp")
    text = jax.jit(mj.compile(ref)).lower(*random_inputs(ref)).as_text()
    assert custom_call_targets(text) == []
    assert "dot_general" in text


def _every_predefined_op_graph():
    kg = mj.KernelGraph()
    a = kg.new_input((2, 3, 4))
    w = kg.new_input((4, 5))
    row = kg.new_input((5,))
    m = kg.matmul(a, w)  # [2, 3, 5], w broadcast over the batch
    squares = kg.square(m)
    unary = [
        kg.exp(kg.mul_scalar(m, 0.25)),
        squares,
        kg.sqrt(kg.add_scalar(squares, 1.0)),
        kg.rsqrt(kg.add_scalar(squares, 0.5)),
        kg.silu(m),
        kg.gelu(m),
        kg.relu(m),
        kg.sigmoid(m),
        kg.neg(m),
        kg.recip(kg.add_scalar(squares, 2.0)),
    ]
    total = unary[0]
    for u in unary[1:]:
        total = kg.add(total, u)
    total = kg.div(kg.sub(total, row), kg.add_scalar(kg.square(row), 1.0))  # broadcast [5]
    kg.mark_output(kg.rms_norm(total, eps=1e-5))
    kg.mark_output(kg.concat(kg.reduce(total, 1, "max"), kg.reduce(total, 1, "mean"), dim=2))
    kg.mark_output(kg.mul(kg.reduce(total, 0, "sum"), total))
    kg.mark_output(w)  # an input as an output
    return kg


def test_predefined_ops_lower_like_the_interpreter():
    kg = _every_predefined_op_graph()
    inputs = random_inputs(kg, seed=11)
    got = jax.jit(mj.compile(kg))(*inputs)
    want = kg.evaluate(inputs)
    assert len(got) == len(want) == 4
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, storage_rtol("float32"), f"predefined ops: output {i}")


def test_compiled_function_runs_eagerly_and_under_vmap():
    _, fused = small("lora")
    inputs = random_inputs(fused, seed=12)
    f = mj.compile(fused)
    (eager,) = f(*inputs)
    (jitted,) = jax.jit(f)(*inputs)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    batched_x = jnp.stack([inputs[0], 2.0 * inputs[0]])
    (batched,) = jax.vmap(lambda x: f(x, *inputs[1:]))(batched_x)
    (second,) = f(batched_x[1], *inputs[1:])
    np.testing.assert_array_equal(np.asarray(batched[0]), np.asarray(eager))
    np.testing.assert_array_equal(np.asarray(batched[1]), np.asarray(second))


def test_compiled_function_checks_its_arguments():
    _, fused = small("rmsnorm_linear")
    inputs = random_inputs(fused)
    f = mj.compile(fused)
    with pytest.raises(TypeError, match="takes 3 input arrays, got 2"):
        f(*inputs[:2])
    with pytest.raises(ValueError, match=r"input 0 \(t0\) must have shape \(2, 16\)"):
        f(inputs[0][:1], *inputs[1:])
    with pytest.raises(TypeError, match=r"input 2 \(t2\) must have dtype float32"):
        f(*inputs[:2], inputs[2].astype(jnp.float16))


@pytest.mark.parametrize("which", [0, 1], ids=["predefined-ops", "generated-kernel"])
def test_reshaped_inputs_and_outputs_are_the_same_values(which):
    """How a region hands a kernel its values (mirage_jax/rewrite/region.py): any reshape of
    each input, each output in the shape asked for, predefined ops and kernels alike."""
    graph = small("rmsnorm_linear")[which]
    inputs = random_inputs(graph)
    f = mj.compile(graph)
    jitted = runtime_compile.jit(f)
    (want,) = jitted(*inputs)
    reshaped = [x.reshape(1, *x.shape) for x in inputs]
    out_shape = (want.shape[0], 1, want.shape[1])
    (got,) = jitted(*reshaped, out_shapes=(out_shape,), reshaped_inputs=True)
    assert got.shape == out_shape
    np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), np.asarray(want))
    with pytest.raises(ValueError, match=r"input 0 \(t0\) must have shape \(2, 16\) or a reshape"):
        f(inputs[0][:1], *inputs[1:], reshaped_inputs=True)
    with pytest.raises(ValueError, match=r"output shape \(5, 5\) is not a reshape of \(2, 12\)"):
        f(*inputs, out_shapes=((5, 5),))
    with pytest.raises(TypeError, match="has 1 outputs, got 2 shapes"):
        f(*inputs, out_shapes=(out_shape, out_shape))


@pytest.mark.parametrize("call", [mj.compile, mj.generate_code])
def test_unsupported_backends_are_named(call):
    _, fused = small("ntrans")
    with pytest.raises(NotImplementedError, match="'tpu' is not supported"):
        call(fused, backend="tpu")


def test_non_graph_argument_is_a_type_error():
    with pytest.raises(TypeError, match="expected a mirage_jax KernelGraph, got BlockGraph"):
        mj.compile(mj.BlockGraph())


def test_generate_code_is_one_translation_unit_holding_every_kernel(tmp_path):
    ref, fused = small("gqa_prefill")
    source = mj.generate_code(fused)
    symbols = [
        mj._core.cpu_kernel_symbol(op.block_graph._core)
        for op in fused.ops
        if op.kind == "customized"
    ]
    for symbol in symbols:
        assert f"void {symbol}(const MjCpuGridV1* grid, void* const* buffers)" in source
        assert f"const int64_t* {symbol}_signature()" in source
    assert mj.generate_code(ref) == ""
    path = tmp_path / "all_kernels.cc"
    path.write_text(source)
    done = subprocess.run(
        [
            toolchain.find_gxx(),
            "-std=c++17",
            "-fsyntax-only",
            str(path),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_generate_cpu_kernel_rejects_a_symbol_that_is_not_an_identifier():
    _, fused = small("ntrans")
    (op,) = [op for op in fused.ops if op.kind == "customized"]
    with pytest.raises(mj.IRError, match="'1bad-name' is not a C identifier"):
        mj._core.generate_cpu_kernel(op.block_graph._core, "1bad-name")
