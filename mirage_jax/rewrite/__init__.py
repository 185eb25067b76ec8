"""The `@mirage_jax.optimize` decorator: a function specialized per input signature
(decorator.py, signature.py), its regions rewritten as superoptimized kernels (region.py),
per shard under a sharded jit (shard.py), and what became of each region (explain.py).

(The folder is not called `optimize`: `mirage_jax.optimize` is the public decorator, and a
subpackage of the same name would replace it as an attribute of the package on first import.)
"""
