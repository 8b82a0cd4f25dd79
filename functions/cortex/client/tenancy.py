"""The SDK's tenancy methods (route /api/v1/me)."""

from __future__ import annotations

from cortex.client._core import Op, amethod, method, parser
from cortex.tenancy.models import Me


def whoami() -> Op[Me]:
    """GET /me: Who am I: the tenant and agent this key acts as."""
    return Op("whoami", "GET", "/me", parser(Me))


class Methods:
    """tenancy: the Client's methods."""

    whoami = method(whoami)


class AsyncMethods:
    """tenancy: the AsyncClient's methods."""

    whoami = amethod(whoami)
