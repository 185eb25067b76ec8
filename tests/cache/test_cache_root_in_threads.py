"""A cache root chosen by the caller (cache_dir=, store.using_cache_root) holds every kernel
built for it, including those built on a pool's threads (mj.compile and prebuild build
several kernels side by side); the default root gets none of them."""

import mirage_jax as mj
from mirage_jax.cache import store
from mirage_jax.ir.paper_graphs import rmsnorm_linear
from mirage_jax.runtime import compile as _compile


def fused(batch):
    return rmsnorm_linear(batch=batch, hidden=16, out_features=8, col_tile=4, k_tile=4)[1]


def libraries(root):
    return sorted(p.parent.name for p in root.rglob("kernel.so"))


def test_kernels_built_on_worker_threads_go_to_the_callers_root(tmp_path, monkeypatch):
    default, chosen = tmp_path / "default", tmp_path / "chosen"
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(default))
    monkeypatch.setattr(_compile, "build_slots", lambda: 2)  # a pool even on one core
    graphs = [fused(4), fused(8)]
    with store.using_cache_root(chosen):
        generated = _compile.prebuild(graphs)
        assert len({source for g in generated.values() for _, source in g.values()}) == 2
        for graph in graphs:
            mj.compile(graph)
    assert len(libraries(chosen)) == 2
    assert libraries(default) == []
