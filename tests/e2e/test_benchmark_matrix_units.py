"""benchmarks/matrix_units.py --quick: the probe compiles with the kernels' flags and reports
each unit's rate on one core (0 where this CPU lacks it, -1 where the tiles were refused);
bad arguments are refused by name."""

import json

from benchmark_support import run_benchmark

from mirage_jax.runtime import toolchain


def test_each_unit_the_cpu_has_reports_a_rate(tmp_path):
    out = tmp_path / "rates.json"
    done = run_benchmark("matrix_units.py", "--quick", "--json", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rates = json.loads(out.read_text())
    assert set(rates) == {"fma", "dpbf16", "amx"} and rates["fma"] > 0
    flags = toolchain.cpu_flags()
    assert (rates["dpbf16"] > 0) == ("avx512_bf16" in flags)
    assert (rates["amx"] != 0) == ("amx_bf16" in flags and "amx_tile" in flags)
    assert done.stdout.count("(one core)") == 3


def test_bad_arguments_are_named():
    done = run_benchmark("matrix_units.py", "--seconds", "0")
    assert done.returncode != 0 and "--seconds must be positive" in done.stderr
