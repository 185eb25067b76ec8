"""The μGraph IR: KernelGraph and BlockGraph builders over the C++ graphs of mirage_jax._core
(graph.py), Tensor/Op handles (handles.py), argument checks (args.py), the reference
interpreter (evaluate.py), lossless JSON (json.py) and the paper's graphs (paper_graphs.py)."""
