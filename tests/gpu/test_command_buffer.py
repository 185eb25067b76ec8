"""Whether XLA records mirage_jax's CUDA custom calls into its command buffers (CUDA graphs):
the generated FFI handlers declare the command-buffer trait (cc/codegen/cuda/emit_handler.cc),
so with custom calls enabled for command buffers the call should end up inside one, giving
the same result as without. On the first GPU run it did not (the xfail below says what was
seen); the result was right either way.

Older XLA formed command buffers in HLO (a `command_buffer` computation); newer XLA forms
them from the thunk sequence after compilation, visible only in the dump's
`thunk_sequence_after_thunk_passes.txt` (a kCommandBuffer holding the kCustomCall). Either
counts. XLA_FLAGS are read once, when the GPU backend starts: the check runs in a
subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import pytest


def _gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


pytestmark = pytest.mark.skipif(
    _gpu() is None, reason="no GPU visible to jax (jax.devices('gpu') failed)"
)

SCRIPT = textwrap.dedent("""
    import pathlib, re, sys
    import jax, jax.numpy as jnp, numpy as np
    import mirage_jax as mj
    from mirage_jax import _core
    from mirage_jax.ir.paper_graphs import PROGRAMS
    _, fused = PROGRAMS["rmsnorm_linear"].build(batch=16, hidden=256, out_features=128,
                                                col_tile=64, k_tile=64, dtype="bfloat16")
    symbols = [_core.cuda_kernel_symbol(op.block_graph._core) for op in fused.ops
               if op.kind == "customized"]
    rng = np.random.default_rng(0)
    args = [jax.device_put(jnp.asarray(rng.standard_normal(t.shape), t.dtype))
            for t in fused.inputs]
    f = jax.jit(mj.compile(fused, backend="cuda"))
    hlo = f.lower(*args).compile().as_text()
    computations = re.split(r"\\n(?=\\S)", hlo)
    buffers = [c for c in computations if re.match(r"%?command_buffer", c)]
    held = [c for c in buffers if any(s in c for s in symbols)]
    print("HLO command buffers:", len(buffers), "holding the kernel:", len(held))
    dump = pathlib.Path(sys.argv[1])
    for before in dump.glob("*before_optimizations.txt"):
        if not any(s in before.read_text() for s in symbols):
            continue
        prefix = before.name[: -len("before_optimizations.txt")]
        after = dump / (prefix + "thunk_sequence_after_thunk_passes.txt")
        thunks = after.read_text() if after.exists() else ""
        print(after.name, "exists" if after.exists() else "missing", repr(thunks[:400]))
        if re.search(r"kCommandBuffer[^\\n]*\\n(\\s+[^\\n]*\\n)*?\\s+\\S+: kCustomCall", thunks):
            held.append(after.name)
    out = np.asarray(f(*args)[0], np.float32)
    want = np.asarray(fused.evaluate([np.asarray(a) for a in args])[0], np.float32)
    err = float(np.max(np.abs(out - want)) / np.max(np.abs(want)))
    print("error", err)
    sys.exit(0 if held and err < 4 * 2**-7 else 1)
""")


@pytest.mark.xfail(
    strict=True,
    reason="seen on the first GPU run (H200, jax 0.11.2, 2026-12-04): XLA wrapped its own "
    "thunks in command buffers (a copy, in another module) but no thunk pass changed the "
    "module holding the FFI call, with the handler's declared trait and also when it was "
    "registered with COMMAND_BUFFER_COMPATIBLE (tried, then reverted); the result was "
    "right. Strict: passing means XLA now records the call, and this mark goes.",
)
def test_the_command_buffer_holds_the_custom_call(tmp_path):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_gpu_enable_command_buffer="
        "FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"
        f" --xla_dump_to={tmp_path / 'dump'} --xla_dump_hlo_as_text"
    ).strip()
    env["MIRAGE_JAX_CACHE"] = str(tmp_path / "cache")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-P", "-c", SCRIPT, str(tmp_path / "dump")],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=600,
    )
    assert done.returncode == 0, (
        f"the custom call is not in a command buffer, or its result is wrong:\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
