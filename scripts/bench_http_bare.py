"""Bare functions-framework targets for scripts/bench_http.py: what the HTTP stack alone costs.

    functions-framework --asgi --source scripts/bench_http_bare.py --target bare       (the reference)
    functions-framework --source scripts/bench_http_bare.py --target bare_sync         (Flask/gunicorn)

No routing, no authentication, no database: a small JSON response, like Cortex's /health.
"""

from __future__ import annotations

from typing import Any

BODY = {"status": "ok", "service": "bare"}


async def bare(request: Any) -> dict[str, str]:
    """ASGI mode: functions-framework wraps a dict in a Starlette JSONResponse."""
    return BODY


def bare_sync(request: Any) -> dict[str, str]:
    """Flask mode: Flask turns a dict into a JSON response."""
    return BODY
