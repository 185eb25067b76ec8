"""benchmarks/control_flow.py at its quick sizes: the scanned stack is timed three ways with
its kernels really running when forced, and the decode P @ V and softmax forms are
superoptimized with their candidates timed beside XLA (the softmax lifted whole)."""

from zoo_support import import_benchmark_module


def test_the_control_flow_benchmark_runs_at_small_sizes(capsys):
    bench = import_benchmark_module("control_flow")
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for dtype in ("float32", "bfloat16"):
        (line,) = [x for x in out.splitlines() if x.strip().startswith(dtype + ":")]
        assert "jax.jit" in line and "mj.optimize" in line and "kernels: True" in line, line
    pv, softmax = out.split("decode_softmax:")
    for part in (pv, softmax):
        assert "xla (the original graph)" in part and "speedup over XLA" in part
    assert "lifted whole into one kernel" in softmax
