"""Bad arguments raise the right Python exception with a message that names the op, the
argument or tensor, and the rule; nothing crashes."""

import numpy as np
import pytest

import mirage_jax as mj


@pytest.fixture
def kg():
    return mj.KernelGraph()


def test_ir_error_is_a_value_error_carrying_the_cpp_message(kg):
    a, b = kg.new_input((2, 3)), kg.new_input((4, 5))
    with pytest.raises(mj.IRError, match="matmul") as info:
        kg.matmul(a, b)
    assert isinstance(info.value, ValueError)
    assert "t0" in str(info.value) and "t1" in str(info.value)


def test_tensor_of_another_graph_names_both_graphs(kg):
    other = mj.KernelGraph()
    a, b = kg.new_input((2,)), other.new_input((2,))
    with pytest.raises(ValueError, match=f"{other.label}.*{kg.label}"):
        kg.add(a, b)


def test_block_tensor_in_a_kernel_graph_and_back(kg):
    X = kg.new_input((4, 4))
    bg = mj.BlockGraph()
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=-1)
    with pytest.raises(ValueError, match=f"exp.*{bg.label}.*{kg.label}"):
        kg.exp(x)
    with pytest.raises(ValueError, match=f"{kg.label}.*{bg.label}"):
        bg.exp(X)
    with pytest.raises(ValueError, match=r"new_input.*block graph"):
        bg.new_input(x, imap=(-1, -1, -1), fmap=-1)


@pytest.mark.parametrize("bad", [[1, 2], (0,), None, "t0", 3])
def test_non_tensor_argument_is_a_type_error(kg, bad):
    with pytest.raises(TypeError, match="matmul: argument 'b' must be a mirage_jax Tensor"):
        kg.matmul(kg.new_input((2, 2)), bad)


@pytest.mark.parametrize(
    "shape, error, fragment",
    [
        ((2, 2.5), TypeError, r"'shape\[1\]' must be an integer"),
        ((2, True), TypeError, r"'shape\[1\]' must be an integer, got bool"),
        ("ab", TypeError, "'shape' must be a tuple or list"),
        (4, TypeError, "'shape' must be a tuple or list"),
        ((2, 2**70), ValueError, "does not fit"),
        ((2, 0), mj.IRError, "new_input"),
        ((2, -3), mj.IRError, "new_input"),
        ((), mj.IRError, "new_input"),
        ((1, 1, 1, 1, 1, 1), mj.IRError, "new_input"),
    ],
)
def test_bad_shapes(kg, shape, error, fragment):
    with pytest.raises(error, match=fragment):
        kg.new_input(shape)


def test_numpy_integer_dims_are_accepted(kg):
    assert kg.new_input(np.array([2, 3])).shape == (2, 3)
    assert kg.new_input((np.int64(4),), np.float16).dtype == "float16"


@pytest.mark.parametrize(
    "dtype, error, fragment",
    [
        ("int8", ValueError, "unknown dtype 'int8'"),
        ("f32", ValueError, "float32, bfloat16"),
        (7, TypeError, "must be a dtype name"),
        (np.int32, ValueError, "unknown dtype 'int32'"),
    ],
)
def test_bad_dtypes(kg, dtype, error, fragment):
    with pytest.raises(error, match=fragment):
        kg.new_input((2,), dtype)


@pytest.mark.parametrize(
    "call, error, fragment",
    [
        (lambda kg, x: kg.mul_scalar(x, "2"), TypeError, "mul_scalar: argument 'c' must be a real"),
        (lambda kg, x: kg.add_scalar(x, float("nan")), ValueError, "must be finite"),
        (lambda kg, x: kg.rms_norm(x, eps=None), TypeError, "rms_norm: argument 'eps'"),
        (lambda kg, x: kg.reduce(x, 0, "prod"), ValueError, "unknown value 'prod'"),
        (lambda kg, x: kg.reduce(x, 1.0), TypeError, "reduce: argument 'dim'"),
        (lambda kg, x: kg.reduce(x, 5), mj.IRError, "reduce"),
        (lambda kg, x: kg.concat(x, x, "0"), TypeError, "concat: argument 'dim'"),
        (lambda kg, x: kg.mark_output([x]), TypeError, "mark_output: argument 't'"),
    ],
)
def test_bad_op_arguments(kg, call, error, fragment):
    with pytest.raises(error, match=fragment):
        call(kg, kg.new_input((2, 3)))


@pytest.mark.parametrize(
    "imap, fmap, error, fragment",
    [
        ((0, -1), -1, ValueError, "imap' must have 3 entries"),
        ((0, -1, -1, -1), -1, ValueError, "imap' must have 3 entries"),
        ((0.0, -1, -1), -1, TypeError, r"'imap\[0\]' must be an integer"),
        (0, -1, TypeError, "imap' must be a tuple or list"),
        ((0, -1, -1), "1", TypeError, "fmap' must be an integer"),
        ((0, -1, -1), 5, mj.IRError, "fmap"),
        ((1, -1, -1), -1, mj.IRError, "does not divide"),
        ((-1, 0, -1), -1, mj.IRError, "grid size is 1"),
    ],
)
def test_bad_block_inputs(kg, imap, fmap, error, fragment):
    X = kg.new_input((4, 6))
    bg = mj.BlockGraph(grid=(4, 1, 1), forloop_range=2)
    with pytest.raises(error, match=fragment):
        bg.new_input(X, imap=imap, fmap=fmap)


@pytest.mark.parametrize(
    "grid, forloop_range, error, fragment",
    [
        ((2, 1), 1, ValueError, "grid' must have 3 entries"),
        ((2, 1, 1), 1.5, TypeError, "forloop_range' must be an integer"),
        ((0, 1, 1), 1, mj.IRError, "grid entries must be >= 1"),
        ((1, 1, 1), 0, mj.IRError, "forloop_range"),
    ],
)
def test_bad_block_graphs(grid, forloop_range, error, fragment):
    with pytest.raises(error, match=fragment):
        mj.BlockGraph(grid=grid, forloop_range=forloop_range)


def test_block_rules_surface_as_ir_errors(kg):
    X = kg.new_input((4, 8))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=2)
    body = bg.new_input(X, imap=(0, -1, -1), fmap=1)
    total = bg.accum_sum(body)
    with pytest.raises(mj.IRError, match=r"accum_sum.*epilogue"):
        bg.accum_sum(total)
    with pytest.raises(mj.IRError, match=r"add.*mixes"):
        bg.add(body, total)
    with pytest.raises(mj.IRError, match=r"new_output.*loop body"):
        bg.new_output(body, omap=(0, -1, -1))
    with pytest.raises(mj.IRError, match="cross-block reduction"):
        bg.new_output(total, omap=(-1, -1, -1))
    with pytest.raises(ValueError, match="omap' must have 3 entries"):
        bg.new_output(total, omap=(0,))
    with pytest.raises(ValueError, match="unknown dtype"):
        bg.new_output(total, omap=(0, -1, -1), dtype="float64")
    with pytest.raises(TypeError, match="accum_exp_matmul: argument 'v'"):
        bg.accum_exp_matmul(body, np.zeros((2, 2)))


def test_customized_argument_errors(kg):
    X = kg.new_input((4, 8))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    bg.new_output(bg.exp(bg.new_input(X, imap=(0, -1, -1), fmap=-1)), omap=(0, -1, -1))
    with pytest.raises(TypeError, match="'block_graph' must be a mirage_jax BlockGraph"):
        kg.customized([X], kg)
    with pytest.raises(TypeError, match="'inputs' must be a list of Tensors"):
        kg.customized(X, bg)
    with pytest.raises(TypeError, match=r"inputs\[0\]"):
        kg.customized([X.shape], bg)
    with pytest.raises(mj.IRError, match="customized"):
        kg.customized([X, X], bg)
    with pytest.raises(mj.IRError, match="customized"):
        kg.customized([kg.new_input((4, 4))], bg)


def test_evaluate_errors(kg):
    a = kg.new_input((2, 3))
    kg.mark_output(kg.exp(a))
    with pytest.raises(ValueError, match="has 1 inputs, got 2 arrays"):
        kg.evaluate([np.zeros((2, 3)), np.zeros((2, 3))])
    with pytest.raises(ValueError, match=r"input 0 \(t0\) has shape \(2, 3\).*\(3, 2\)"):
        kg.evaluate([np.zeros((3, 2))])
    with pytest.raises(TypeError, match="must be a list of arrays"):
        kg.evaluate(np.zeros((2, 3)))
    with pytest.raises(TypeError, match=r"input 0 \(t0\) cannot be converted"):
        kg.evaluate([[["a", "b", "c"], ["d", "e", "f"]]])
    with pytest.raises(ValueError, match="unknown dtype 'float16'"):
        kg.evaluate([np.zeros((2, 3))], dtype="float16")


def test_verify_argument_errors(kg):
    kg.mark_output(kg.new_input((2,)))
    with pytest.raises(TypeError, match="argument 'b' must be a mirage_jax KernelGraph"):
        mj.verify_equivalent(kg, mj.BlockGraph())
    with pytest.raises(ValueError, match="unknown value 'sometimes'"):
        mj.verify_equivalent(kg, kg, shrink="sometimes")
    with pytest.raises(ValueError, match="'trials' must be >= 1"):
        mj.verify_equivalent(kg, kg, trials=0)
    with pytest.raises(ValueError, match="'seed' must be >= 0"):
        mj.verify_equivalent(kg, kg, seed=-1)
    with pytest.raises(TypeError, match="'trials' must be an integer"):
        mj.verify_equivalent(kg, kg, trials=2.0)


def test_mismatched_graphs_are_not_equivalent_rather_than_an_error(kg):
    kg.mark_output(kg.exp(kg.new_input((2,))))
    other = mj.KernelGraph()
    other.mark_output(other.exp(other.new_input((3,))))
    result = mj.verify_equivalent(kg, other)
    assert not result and result.reason
