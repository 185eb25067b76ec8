"""`python -m benchmarks`: the same as `python benchmarks/run.py` (the paper's programs);
`python -m benchmarks --models ...`: the same as `python benchmarks/models_run.py ...` (the
model zoo of benchmarks/models/).

`-m` puts the current directory first on sys.path. From the repository root that makes the
source folder mirage_jax/ shadow the installed package, whose compiled extension the source
folder lacks (unless installed editable). Dropping that entry before mirage_jax is imported
gives what `python -P` would (a checkout put on PYTHONPATH on purpose, with its extension
built in place, stays), and the benchmark modules import each other from their own folder,
as when run.py runs as a script.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _ROOT:
    del sys.path[0]
sys.path.insert(0, _HERE)

if "--models" in sys.argv[1:]:
    from models_run import main

    sys.exit(main([a for a in sys.argv[1:] if a != "--models"]))

from run import main  # noqa: E402

sys.exit(main())
