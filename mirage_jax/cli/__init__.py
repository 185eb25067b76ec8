"""python -m mirage_jax: the commands demo (demo.py), cache (cache.py) and inspect
(inspect.py), dispatched by main.py."""
