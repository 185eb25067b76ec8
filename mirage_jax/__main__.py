"""python -m mirage_jax: see mirage_jax/cli/main.py."""

import sys

from mirage_jax.cli.main import main

sys.exit(main())
