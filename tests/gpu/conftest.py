"""tests/gpu share the helpers of tests/ (kernel_test_support, the search and CUDA test
tables); pytest puts only this directory on sys.path, so add its parent."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
