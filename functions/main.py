"""functions-framework entry point of the HTTP API.

    functions-framework --source functions/main.py --target api --host 127.0.0.1 --port 8080

The framework routes every path and method to `api` (and serves it with gunicorn); `cortex.api`
does the routing under /api/v1 and /health.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The framework loads this file by path; make the `cortex` package beside it importable even
# when the project is not pip-installed.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from cortex.app import handle as api  # noqa: E402

__all__ = ["api"]
