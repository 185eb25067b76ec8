"""One KernelGraph in, the fastest verified callable out: the search's config (config.py),
the search (search.py, progress.py) and its on-disk cache (search_cache.py), the split of a
program the search cannot fuse whole (split.py), verification (verify.py), the float check
(float_check.py), and superoptimize (superoptimize.py), which puts them together."""
