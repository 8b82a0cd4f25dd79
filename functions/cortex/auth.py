"""Who is calling: turns the request's credentials into the claims every SQL function reads.

Three kinds of credential, all sent as `Authorization: Bearer <token>`:

* an agent key (`ctx_<prefix>_<secret>`): looked up with `cortex.authenticate_key` as the
  database owner, which also stamps the key's `last_used_at`. Positive answers are cached in
  this process for `KEY_CACHE_SECONDS` (30 s) under the key's SHA-256, so a busy agent costs no
  extra round trip per request. Consequence: revoking a key, or disabling or deleting its agent,
  takes effect within 30 seconds, not at once. Unknown or revoked keys are never cached.
* a Supabase JWT (HS256, signed with `CORTEX_JWT_SECRET` / `SUPABASE_JWT_SECRET`): tenant_id and
  agent come from the top level or from `app_metadata`, as `cortex.current_tenant()` reads them.
* the operator's service key (`CORTEX_SERVICE_KEY`): acts in the tenant named by `X-Tenant-ID`
  as the agent named by `X-Agent` (default `system`). `X-Tenant-ID` is refused with any other
  credential, so a tenant header can never widen what a key or token may see.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import jwt

from cortex import db
from cortex.config import get_settings
from cortex.errors import CortexError

KEY_CACHE_SECONDS = 30.0
KEY_CACHE_MAX = 10_000
AGENT_KEY_PREFIX = "ctx_"
JWT_AUDIENCE = "authenticated"
DEFAULT_SERVICE_AGENT = "system"
_AGENT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")

# sha256(key) -> (claims, monotonic expiry). A dict keeps insertion order, so the oldest entry
# is the first one: that is what goes when the cache is full.
_key_cache: dict[str, tuple[dict[str, str], float]] = {}
_key_cache_lock = threading.Lock()
_now: Callable[[], float] = time.monotonic  # the cache's clock (tests move it forward)


def _unauthorized(message: str, hint: str | None = None, field: str = "Authorization") -> CortexError:
    return CortexError(401, "unauthorized", message, field, hint)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    # Starlette's Headers are case-insensitive already; a plain dict (tests, CLI) may not be.
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lowered), None)
    return value.strip() if value is not None else None


def _claims(tenant_id: str, agent: str) -> dict[str, str]:
    return {"role": "authenticated", "tenant_id": tenant_id, "agent": agent}


def clear_key_cache() -> None:
    """Forgets every cached agent-key lookup (tests; an operator may call it after a revocation)."""
    with _key_cache_lock:
        _key_cache.clear()


def _cached(digest: str) -> dict[str, str] | None:
    now = _now()
    with _key_cache_lock:
        hit = _key_cache.get(digest)
        if hit is None:
            return None
        if hit[1] <= now:
            del _key_cache[digest]
            return None
        return dict(hit[0])


def _remember(digest: str, claims: dict[str, str]) -> None:
    now = _now()
    with _key_cache_lock:
        if len(_key_cache) >= KEY_CACHE_MAX:
            for k in [k for k, (_, exp) in _key_cache.items() if exp <= now]:
                del _key_cache[k]
            while len(_key_cache) >= KEY_CACHE_MAX:
                del _key_cache[next(iter(_key_cache))]
        _key_cache[digest] = (dict(claims), now + KEY_CACHE_SECONDS)


def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _key_claims(digest: str, found: Mapping[str, Any] | None) -> dict[str, str]:
    if not found:
        raise _unauthorized(
            "invalid or revoked API key", "ask an operator for a key: cortex keys create <tenant> <agent>"
        )
    claims = _claims(str(found["tenant_id"]), str(found["agent"]))
    _remember(digest, claims)
    return claims


def _agent_key_claims(key: str) -> dict[str, str]:
    digest = _key_digest(key)
    cached = _cached(digest)
    if cached is not None:
        return cached
    # As the owner on a pooled autocommit connection: the key table is invisible to API roles.
    with db.get_pool().connection() as conn:
        return _key_claims(digest, db.call(conn, "cortex.authenticate_key", p_key=key))


async def _agent_key_claims_async(key: str) -> dict[str, str]:
    digest = _key_digest(key)
    cached = _cached(digest)
    if cached is not None:
        return cached
    pool = await db.get_async_pool()
    async with pool.connection() as conn:
        return _key_claims(digest, await db.acall(conn, "cortex.authenticate_key", p_key=key))


def _jwt_claims(token: str) -> dict[str, str]:
    secret = get_settings().jwt_secret
    if not secret:
        raise _unauthorized(
            "JWT authentication is not configured on this server",
            "set CORTEX_JWT_SECRET (or SUPABASE_JWT_SECRET), or use an agent key",
        )
    try:
        # The audience is checked below only when the token names one (service tokens may not).
        payload: dict[str, Any] = jwt.decode(
            token, secret, algorithms=["HS256"], options={"verify_aud": False, "require": ["exp"]}
        )
    except jwt.ExpiredSignatureError as exc:
        raise _unauthorized("JWT has expired", "sign in again for a fresh token") from exc
    except jwt.InvalidTokenError as exc:
        raise _unauthorized(f"invalid JWT: {exc}") from exc
    if "aud" in payload:
        aud = payload["aud"]
        audiences = [aud] if isinstance(aud, str) else list(aud) if isinstance(aud, list) else []
        if JWT_AUDIENCE not in audiences:
            raise _unauthorized(f'JWT audience must be "{JWT_AUDIENCE}"')
    # PostgREST runs a request as the JWT's `role` (the anon role when there is none); only
    # `authenticated` may call the API, so anything else is refused here as it would be there.
    role = payload.get("role")
    if role != JWT_AUDIENCE:
        raise _unauthorized(
            f"JWT role {role!r} cannot use the API" if role is not None else "JWT has no role claim (anon)",
            'sign in for a token with role "authenticated", or use an agent key',
        )
    raw_meta = payload.get("app_metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    tenant = payload.get("tenant_id") or meta.get("tenant_id")
    agent = payload.get("agent") or meta.get("agent")
    if not isinstance(tenant, str) or not tenant:
        raise _unauthorized("JWT has no tenant_id claim (top level or app_metadata)")
    try:
        tenant = str(uuid.UUID(tenant))
    except ValueError as exc:
        raise _unauthorized("JWT tenant_id claim is not a UUID") from exc
    if not isinstance(agent, str) or not agent:
        raise _unauthorized("JWT has no agent claim (top level or app_metadata)")
    return _claims(tenant, agent)


def _service_claims(headers: Mapping[str, str]) -> dict[str, str]:
    tenant = _header(headers, "X-Tenant-ID")
    if not tenant:
        raise CortexError(
            422,
            "validation_error",
            "X-Tenant-ID is required with the service key",
            "X-Tenant-ID",
            "name the tenant to act in: X-Tenant-ID: <tenant uuid>",
        )
    try:
        tenant = str(uuid.UUID(tenant))
    except ValueError as exc:
        raise CortexError(422, "validation_error", "X-Tenant-ID must be a UUID", "X-Tenant-ID") from exc
    agent = _header(headers, "X-Agent") or DEFAULT_SERVICE_AGENT
    if not _AGENT_NAME.match(agent):
        raise CortexError(
            422,
            "validation_error",
            "X-Agent must be an agent name (lower-case letters, digits, _ and -)",
            "X-Agent",
        )
    return _claims(tenant, agent)


def _resolve(headers: Mapping[str, str]) -> dict[str, str] | str:
    """The caller's claims, or the agent key still to be looked up."""
    authorization = _header(headers, "Authorization")
    has_tenant_header = _header(headers, "X-Tenant-ID") is not None
    if not authorization:
        if has_tenant_header:
            raise _unauthorized(
                "X-Tenant-ID is accepted only with the service key",
                "authenticate with Authorization: Bearer <agent key or JWT>",
            )
        raise _unauthorized("missing credentials", "send Authorization: Bearer <agent key>, <JWT> or <service key>")
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("Authorization must be 'Bearer <token>'")

    service_key = get_settings().service_key
    if service_key and hmac.compare_digest(token.encode(), service_key.encode()):
        return _service_claims(headers)
    if has_tenant_header:
        raise _unauthorized(
            "X-Tenant-ID is accepted only with the service key",
            "an agent key or JWT already names its tenant; drop the header",
        )
    if token.startswith(AGENT_KEY_PREFIX):
        return token
    if token.count(".") == 2:
        return _jwt_claims(token)
    raise _unauthorized("unrecognised bearer token", "use an agent key (ctx_...), a Supabase JWT or the service key")


def authenticate(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's claims `{"role": "authenticated", "tenant_id", "agent"}` from the request
    headers; CortexError 401 when the credentials are missing or wrong, 422 for a malformed
    X-Tenant-ID or X-Agent sent with the service key."""
    resolved = _resolve(headers)
    return _agent_key_claims(resolved) if isinstance(resolved, str) else resolved


async def authenticate_async(headers: Mapping[str, str]) -> dict[str, str]:
    """`authenticate` for the async edge: an agent key is looked up on the async pool."""
    resolved = _resolve(headers)
    return await _agent_key_claims_async(resolved) if isinstance(resolved, str) else resolved
