"""@mirage_jax.optimize on sharded inputs (mirage_jax/rewrite/shard.py), on 4 host devices in a
subprocess (XLA_FLAGS must be set before jax starts): under jit each device runs a kernel
specialized for its shard, with no all-gather of the kernel's inputs (a square weight under a
residual and a loop body's kernel included); inside shard_map the kernel runs on the local
block. Outputs are compared with jax.jit of the original on the
same shardings, and a control run without the partitioning rule shows that the HLO check
does see the all-gather a plain custom call gets. An input split along a dim the region
reduces over must be gathered: that is warned, not silent."""

import json
import os
import subprocess
import sys
import textwrap

from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
    import mirage_jax as mj
    from mirage_jax.rewrite import transparent as _transparent
    from mirage_jax.runtime import profile as _profile
    from optimize_test_support import inputs, normwise, rmsnorm_linear

    # Timing decides kernel vs XLA; this is about partitioning, so kernels always win (the
    # float checks still run for real).
    _profile.median_times = lambda fns, args, **_: ({n: (1.0 if n == "xla" else 0.5)
                                                for n in fns}, 1)
    assert len(jax.devices()) == 4
    x, g, w = inputs()  # x [8, 256]: 2 rows per device
    want = np.asarray(jax.jit(rmsnorm_linear)(x, g, w))
    out = {}

    def check(name, fn, *args):
        compiled = jax.jit(fn).lower(*args).compile().as_text()
        got = jax.jit(fn)(*args)
        out[name] = dict(error=normwise(got, want), all_gather="all-gather" in compiled,
                         kernel="mj_cpu_" in compiled,
                         spec=str(getattr(got.sharding, "spec", None)))

    for mode in ("auto", "explicit"):
        kind = AxisType.Auto if mode == "auto" else AxisType.Explicit
        mesh = jax.make_mesh((4,), ("d",), axis_types=(kind,))
        xs = jax.device_put(x, NamedSharding(mesh, P("d", None)))
        f = mj.optimize(rmsnorm_linear)
        check("jit_" + mode, f, xs, g, w)
        out["explain_" + mode] = f.explain_all()

    mesh = jax.make_mesh((4,), ("d",), axis_types=(AxisType.Auto,))
    xs = jax.device_put(x, NamedSharding(mesh, P("d", None)))

    # value and gradients through the per-shard kernel (the backward pass is XLA's)
    def loss(fn):
        return lambda x, g, w: jnp.sum(fn(x, g, w) ** 2)

    vg = jax.jit(jax.value_and_grad(loss(mj.optimize(rmsnorm_linear)), argnums=(0, 1, 2)))
    compiled = vg.lower(xs, g, w).compile().as_text()
    value, grads = vg(xs, g, w)
    value_want, grads_want = jax.value_and_grad(loss(rmsnorm_linear), argnums=(0, 1, 2))(x, g, w)
    out["grad"] = dict(errors=[normwise(value, value_want)] + [
        normwise(a, b) for a, b in zip(grads, grads_want)],
        all_gather="all-gather" in compiled, kernel="mj_cpu_" in compiled)

    f = mj.optimize(rmsnorm_linear)
    check("shard_map", jax.shard_map(f, mesh=mesh, in_specs=(P("d", None), P(), P()),
                                     out_specs=P("d", None)), xs, g, w)
    out["shard_map_regions"] = [r.chosen for r in f.regions(x[:2], g, w)]

    # Sharded along the dim the norm and the matmul reduce over: gathered, and warned.
    import warnings
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        check("k_sharded", mj.optimize(rmsnorm_linear),
              jax.device_put(x, NamedSharding(mesh, P(None, "d"))), g, w)
    out["k_sharded_warnings"] = [str(r.message) for r in record
                                 if "mirage_jax.optimize" in str(r.message)]

    # A square weight under a residual: the residual ties W's two dims into one factor, which
    # a sharding rule cannot name twice (the program failed to lower); then the same layer as
    # the body of a scan over stacked weights (the body's kernel partitioned in the loop).
    def residual(x, g, w):
        return x + rmsnorm_linear(x, g, w)

    square = jnp.asarray(np.random.default_rng(1).standard_normal((256, 256)) / 16, jnp.float32)
    want = np.asarray(jax.jit(residual)(x, g, square))
    check("square", mj.optimize(residual), xs, g, square)

    def scanned(x, gs, ws):
        return jax.lax.scan(lambda x, p: (residual(x, *p), None), x, (gs, ws))[0]

    gs, ws = jnp.stack([g, g, g]), jnp.stack([square, -square, square / 2])
    want = np.asarray(jax.jit(scanned)(x, gs, ws))
    check("scan", mj.optimize(scanned), xs, gs, ws)
    want = np.asarray(jax.jit(rmsnorm_linear)(x, g, w))

    # Control: the same kernel without its partitioning rule is gathered.
    # (transparent.py binds the rule by name: the control replaces it there)
    _transparent.partitioned = lambda region, kernel, report, settings: kernel
    check("control", mj.optimize(rmsnorm_linear), xs, g, w)
    print(json.dumps(out))
""")


def test_sharded_inputs_run_per_shard_without_gathering(session_kernel_cache):
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
        "MIRAGE_JAX_CACHE": str(session_kernel_cache),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            SCRIPT,
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("jit_auto", "jit_explicit", "shard_map", "square", "scan"):
        r = out[name]
        assert r["error"] < 1e-5, (name, r)
        assert r["kernel"] and not r["all_gather"], (name, r)
        assert r["spec"].startswith("P('d'"), (name, r)  # the output stays row-sharded
    for mode in ("auto", "explicit"):
        # the kernel that ran per device was specialized for the [2, 256] shard
        text = out["explain_" + mode]
        head = "per shard (inputs [2, 256], [256], [256, 64]):\n"
        assert head in text, text
        assert ": kernel (" in text.split(head, 1)[1].splitlines()[0], text
    assert out["shard_map_regions"] == ["kernel"]
    grad = out["grad"]
    assert max(grad["errors"]) < 1e-5 and grad["kernel"] and not grad["all_gather"], grad
    k = out["k_sharded"]
    assert k["error"] < 1e-5 and k["kernel"] and k["all_gather"], k
    (warning,) = out["k_sharded_warnings"]
    assert "inputs gathered along input 0 dim 1 (d, reduced over)" in warning, warning
    control = out["control"]
    assert control["error"] < 1e-5 and control["kernel"] and control["all_gather"], control
