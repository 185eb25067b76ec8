"""benchmarks/kernel_compile.py: a paper program's kernel compiled with and without the
precompiled header, each way timed and the ratio printed; bad arguments are refused by name."""

import re

from benchmark_support import run_benchmark


def test_one_kernel_is_compiled_both_ways_and_compared():
    done = run_benchmark("kernel_compile.py", "--rounds", "1", "--only", "ntrans")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert re.search(r"precompiling the headers: \d+\.\d+ s", done.stdout), done.stdout
    row = re.search(r"^ntrans +\d+ +(\d+\.\d+) +(\d+\.\d+) +(\d+\.\d+)x$", done.stdout, re.M)
    assert row, done.stdout
    with_header, without, ratio = map(float, row.groups())
    assert with_header > 0 and without > 0
    assert abs(ratio - without / with_header) < 0.01 + 0.01 * ratio
    assert "geometric mean" in done.stdout


def test_bad_arguments_are_named():
    done = run_benchmark("kernel_compile.py", "--only", "no_such_program")
    assert done.returncode != 0 and "no program ['no_such_program']" in done.stderr
    done = run_benchmark("kernel_compile.py", "--rounds", "0")
    assert done.returncode != 0 and "--rounds must be at least 1" in done.stderr
