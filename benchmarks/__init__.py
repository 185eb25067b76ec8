"""The benchmark suite: `python -m benchmarks` or `python benchmarks/run.py` (see run.py).

benchmarks/superoptimize.py and benchmarks/kernels.py time mirage_jax's μGraph-level
pieces; run.py times whole JAX functions under mirage_jax.optimize."""
