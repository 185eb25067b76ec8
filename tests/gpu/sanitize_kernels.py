"""A few generated kernels, small shapes, run once each and checked against the
interpreter: what tests/gpu/run.sh runs under compute-sanitizer (memcheck, racecheck,
synccheck), with --kernel-name kns=mj_cuda_ so only mirage_jax's kernels are instrumented.
Chosen to cover every code path at least once: 16-bit tensor cores with ldmatrix and
register accumulators (rmsnorm_linear, gated_mlp), the online softmax with its state in
registers (flash_attention_online), split-KV with a combine kernel and f32 FMA (gqa_decode),
row reductions (ntrans).

    python tests/gpu/sanitize_kernels.py      (exit 1 on a wrong result, 2 without a GPU)
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel_test_support import FRAGMENT_SIZED, kernel_rtol, random_inputs

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import PROGRAMS

CASES = [
    ("rmsnorm_linear", "bfloat16"),
    ("gated_mlp", "bfloat16"),
    ("flash_attention_online", "bfloat16"),
    ("gqa_decode", "float32"),
    ("ntrans", "float32"),
]


def main() -> int:
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError as e:
        print(f"sanitize_kernels: no GPU visible to jax ({e})", file=sys.stderr)
        return 2
    failed = 0
    for name, dtype in CASES:
        program = PROGRAMS[name]
        _, fused = program.build(**FRAGMENT_SIZED.get(name, program.small), dtype=dtype)
        inputs = random_inputs(fused, seed=1)
        got = jax.block_until_ready(
            mj.compile(fused, backend="cuda")(*[jax.device_put(x, gpu) for x in inputs])
        )
        want = fused.evaluate([np.asarray(x) for x in inputs])
        for g, w, t in zip(got, want, fused.outputs):
            g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
            err = float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30))
            ok = err <= kernel_rtol(t.dtype, tf32=dtype == "float32")
            failed += not ok
            print(f"{name} {dtype}: error {err:.1e}{'' if ok else ' WRONG'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
