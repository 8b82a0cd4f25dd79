"""The SDK's health methods (routes under /api/v1/health)."""

from __future__ import annotations

from typing import Any

from cortex.client._core import Op, amethod, method, parser
from cortex.health import Health, HealthDeep, HealthReady


def health() -> Op[Health]:
    """GET /health: Liveness (no dependency is asked)."""
    return Op("health", "GET", "/health", parser(Health))


def health_ready() -> Op[HealthReady]:
    """GET /health/ready: Readiness: database round trip and applied migrations."""
    return Op("health_ready", "GET", "/health/ready", parser(HealthReady))


def health_deep() -> Op[HealthDeep]:
    """GET /health/deep: Readiness plus the language model (service key or admin agent)."""
    return Op("health_deep", "GET", "/health/deep", parser(HealthDeep))


def openapi() -> Op[dict[str, Any]]:
    """GET /openapi.json: The API's OpenAPI 3.1 document, as a dict."""
    return Op("openapi", "GET", "/openapi.json", dict)


class Methods:
    """health: the Client's methods."""

    health = method(health)
    health_ready = method(health_ready)
    health_deep = method(health_deep)
    openapi = method(openapi)


class AsyncMethods:
    """health: the AsyncClient's methods."""

    health = amethod(health)
    health_ready = amethod(health_ready)
    health_deep = amethod(health_deep)
    openapi = amethod(openapi)
