"""python -m mirage_jax: see mirage_jax/cli.py."""

import sys

from mirage_jax.cli import main

sys.exit(main())
