"""Health checks: liveness (no dependency asked), readiness (database and migrations), deep (plus the model).

Part of the core: every deployment needs them, and they know no capability.

`/health/deep` asks Claude for one token, which costs money, so it is not open to anyone: it
needs the service key or an admin agent's credentials (401 without, 403 for another agent), its
model answer is cached for `DEEP_CACHE_SECONDS` (60 s) per process, and each real call is
recorded in token_usage for the caller's tenant and agent (operation `health_check`).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import logging
import threading
import time
from typing import Any, Literal

import psycopg
from starlette.concurrency import run_in_threadpool

from cortex import db, migrate
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.routing import Call, Reply, Router
from cortex.schemas import Response

logger = logging.getLogger("cortex.health")

READY_TIMEOUT_SECONDS = 3.0
DEEP_LLM_TIMEOUT_SECONDS = 10.0
# A deep check's model answer is reused this long, so polling it cannot burn tokens.
DEEP_CACHE_SECONDS = 60.0

router = Router("health")


class Health(Response):
    """GET /health: the process is up (no dependency is asked)."""

    status: Literal["ok"]
    service: str
    version: str


class MigrationStatus(Response):
    """Schema migrations known to this build and applied to the database."""

    applied: int
    expected: int
    pending: list[str]


class HealthReady(Response):
    """GET /health/ready: the database answers and the schema is up to date (503 otherwise)."""

    status: Literal["ok", "unavailable"]
    database: str
    migrations: MigrationStatus | None = None
    error: str | None = None


class HealthDeep(HealthReady):
    """GET /health/deep: ready, plus the language model (`local` when no Claude key is set)."""

    llm: str
    llm_model: str | None = None
    llm_error: str | None = None
    llm_cached: bool | None = None


@functools.cache
def version() -> str:
    """This build's version (the installed distribution's, 0.0.0 from a bare checkout)."""
    try:
        return importlib.metadata.version("cortex-memory")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def brief(exc: BaseException) -> str:
    """One line about an exception, safe to log and to show."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


async def _applied_versions() -> list[str]:
    pool = await db.get_async_pool()
    async with pool.connection(timeout=READY_TIMEOUT_SECONDS) as conn:
        try:
            cur = await conn.execute("select version from supabase_migrations.schema_migrations")
            return [str(r[0]) for r in await cur.fetchall()]
        except psycopg.errors.UndefinedTable:
            return []


async def readiness() -> tuple[bool, dict[str, Any]]:
    """Whether the database answers within 3 s and every migration of this build is applied."""
    try:
        applied = set(await asyncio.wait_for(_applied_versions(), READY_TIMEOUT_SECONDS + 0.5))
    except Exception as exc:  # any failure to reach the database means "not ready"
        logger.warning("readiness check failed: %s", brief(exc))
        return False, {"status": "unavailable", "database": "unreachable", "error": brief(exc)}
    expected = [m.version for m in migrate.list_migrations()]
    pending = [v for v in expected if v not in applied]
    return not pending, {
        "status": "unavailable" if pending else "ok",
        "database": "ok",
        "migrations": {"applied": len(applied), "expected": len(expected), "pending": pending},
    }


def _ping_model() -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The model's health, and the usage of the call (None when it reported none)."""
    import anthropic  # here, not at import: the SDK takes seconds to import and clients never need it

    settings = get_settings()
    # The cheapest real round trip: a one-token answer from the summary model.
    try:
        with anthropic.Anthropic(
            api_key=settings.anthropic_api_key,
            base_url=settings.anthropic_base_url or None,
            timeout=DEEP_LLM_TIMEOUT_SECONDS,
            max_retries=0,
        ) as client:
            response = client.messages.create(
                model=settings.summary_model, max_tokens=1, messages=[{"role": "user", "content": "ping"}]
            )
        usage = {
            "model": response.model or settings.summary_model,
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        }
        return {"llm": "ok", "llm_model": settings.summary_model}, usage
    except anthropic.AnthropicError as exc:
        logger.warning("deep health check: Claude failed: %s", brief(exc))
        return {"llm": "error", "llm_model": settings.summary_model, "llm_error": brief(exc)}, None


_deep_cache: dict[str, tuple[dict[str, Any], float]] = {}
_deep_lock = threading.Lock()


def clear_deep_cache() -> None:
    """Forgets the cached model answer (tests)."""
    with _deep_lock:
        _deep_cache.clear()


def _cached_ping() -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The model's health from the last minute, or a new one-token call (one at a time)."""
    key = get_settings().summary_model
    with _deep_lock:
        hit = _deep_cache.get(key)
        if hit is not None and hit[1] > time.monotonic():
            return {**hit[0], "llm_cached": True}, None
        answer, usage = _ping_model()
        _deep_cache[key] = (answer, time.monotonic() + DEEP_CACHE_SECONDS)
    return answer, usage


@router.route(
    "GET", "", name="health", summary="Liveness (no dependency is asked)", responses={200: Health}, auth=False,
    absolute=("/health",),
)  # fmt: skip
async def health(call: Call) -> Reply:
    """The process is up."""
    return Reply(200, {"status": "ok", "service": "cortex", "version": version()})


@router.route(
    "GET", "/ready", name="health_ready", summary="Readiness: database round trip and applied migrations",
    responses={200: HealthReady, 503: HealthReady}, auth=False, absolute=("/health/ready",),
)  # fmt: skip
async def ready(call: Call) -> Reply:
    """The database answers and the schema is up to date (503 otherwise)."""
    ok, body = await readiness()
    return Reply(200 if ok else 503, body)


@router.route(
    "GET", "/deep", name="health_deep", summary="Readiness plus the language model (service key or admin agent)",
    responses={200: HealthDeep, 503: HealthDeep}, errors=(403,), absolute=("/health/deep",),
    description="Asks Claude for one token (cached for 60 s; the call is recorded in token_usage as "
    "health_check for the caller). Needs the service key or an admin agent's credentials.",
)  # fmt: skip
async def deep(call: Call) -> Reply:
    """Readiness plus the model (`local` when no Claude key is set)."""
    ok, body = await readiness()
    if body.get("database") != "ok":
        return Reply(503, body)
    if not await db.acall_as(call.claims, "cortex.caller_is_admin"):
        raise CortexError(
            403, "insufficient_privilege", "the deep health check is for operators", None,
            "use the service key or an admin agent's credentials",
        )  # fmt: skip
    settings = get_settings()
    if not settings.use_remote_llm:
        body.update(llm="local", llm_model=settings.local_model)
    else:
        model, usage = await run_in_threadpool(_cached_ping)
        ok = ok and model["llm"] == "ok"
        body.update(model)
        if usage is not None:
            await db.acall_as(
                call.claims, "cortex.record_token_usage", p_tenant_id=call.claims["tenant_id"],
                p_agent=call.claims["agent"], p_model=usage["model"], p_operation="health_check",
                p_input_tokens=usage["input_tokens"], p_output_tokens=usage["output_tokens"],
            )  # fmt: skip
    body["status"] = "ok" if ok else "unavailable"
    return Reply(200 if ok else 503, body)
