"""`bench` made importable by its path alone (tests/conftest.py imports this first): it is run
from the root, never installed, and tests of any folder read its scoring.

Putting the root on sys.path would do it too, but would also let a bare `import shared` pass,
which tests/test_packaging.py keeps failing on purpose.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

if "bench" not in sys.modules:
    spec = importlib.util.spec_from_file_location(
        "bench", BENCH / "__init__.py", submodule_search_locations=[str(BENCH)]
    )
    assert spec is not None and spec.loader is not None
    sys.modules["bench"] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
