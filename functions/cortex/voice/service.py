"""Voice: what Python must do around the SQL of 20261122002500_voice.sql.

* Call start (`client_data`): authenticate the platform (the tenant's voice secret in
  `X-Voice-Secret`, or an agent key), then one round trip to `public.voice_client_data`, which
  decides the answer from JSON rendered at write time. Any failure is the empty default.
* Call end (`accept_post_call`): verify the `ElevenLabs-Signature` HMAC against the post-call
  secret of the tenant that maps the event's platform agent, check the event, and record it once
  per conversation id with its job (`cortex.voice_accept_call`).
* The worker (`process_call`): the platform profile (cached 24 h; fetched from the agents API on a
  miss), the caller's name from the transcript, tier 2 from Claude Haiku or the local generator
  (budgeted: reserve, call, settle), and everything stored in one transaction by
  `cortex.voice_store_call`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import httpx
import psycopg

from cortex import auth, db, llm
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.llm import prompts
from cortex.routing import parse_json, read_body, validate
from cortex.schemas import E164_PATTERN, e164
from cortex.usage import budget
from cortex.voice.models import ClientDataRequest, PostCallData, PostCallEvent, TranscriptionEvent

log = logging.getLogger("cortex.voice")

Claims = Mapping[str, Any]
Turns = list[tuple[str, str]]

#: The header the platform sends the tenant's client-data secret in (configured on its webhook).
SECRET_HEADER = "X-Voice-Secret"
SIGNATURE_HEADER = "ElevenLabs-Signature"
OPERATION = "voice_greeting"
#: The answer when anything goes wrong (SQL's cortex.voice_default_client_data(), the same JSON).
DEFAULT_CLIENT_DATA: dict[str, Any] = {
    "type": "conversation_initiation_client_data",
    "dynamic_variables": {
        "caller_name": "",
        "returning_caller": False,
        "total_interactions": 0,
        "agent_conversation_count": 0,
    },
}
DEFAULT_CLIENT_DATA_TEXT = json.dumps(DEFAULT_CLIENT_DATA)
CLIENT_DATA_MAX_BYTES = 16_384


class Fallback(Exception):
    """The client-data path answers the empty default; `reason` is logged and sent in X-Voice-Fallback."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


# --- names -------------------------------------------------------------------------------------------

_NAME = r"([A-Z][a-z'\-]+(?:[ -][A-Z][a-z'\-]+)?)"
_HONORIFIC = r"(?:(?:Dr|Mr|Mrs|Ms|Miss|Prof)\.?\s+)?"
# The seed's patterns (my name is / I'm / this is / call me / it's ... here), on what the caller says.
_NAME_PATTERNS = (
    re.compile(r"(?i:\bmy name(?: is|'s)|\bname is)\s+" + _HONORIFIC + r"([A-Za-z][A-Za-z'\-]+(?:\s+[A-Z][a-z'\-]+)?)"),
    re.compile(r"(?i:\bcall me)\s+" + _NAME),
    re.compile(r"(?i:\bthis is)\s+" + _HONORIFIC + _NAME),
    re.compile(r"(?i:\bi'm|\bi am|\bim)\s+" + _HONORIFIC + _NAME),
    re.compile(r"(?i:\bit's|\bit is)\s+" + _NAME + r"(?i:\s+(?:here|speaking|calling))"),
    re.compile(r"^(?:(?i:hi|hello|hey|yes|yeah)[,!.]?\s+)?" + _NAME + r"(?i:\s+(?:here|speaking))\b"),
)
# Words that follow "I'm" / "this is" but are no name ("I'm Fine", "This is Great", "I'm Calling").
_NOT_NAMES = frozenset(
    """fine good great okay ok well sorry calling here just not looking trying interested doing back glad happy
    sure very really also still going having wondering afraid new ready done busy tired excited hoping currently
    actually the a an so in on at from with your my his her their our about thinking worried concerned feeling
    better worse alright alive available speaking retired married single calling from hi hello hey yes yeah no
    is it that this what who why how when where there fantastic wonderful terrible awful unsure curious""".split()  # noqa: SIM905
)


def extract_name(turns: Sequence[tuple[str, str]]) -> str | None:
    """The caller's name as said in the call (seed 004's extract_name_from_transcript): the first
    "my name is X", "call me X", "this is X", "I'm X", "it's X here" or "X here/speaking" in a turn
    of the caller (never the agent's), one or two words, capitalised; None when the name is never said."""
    for role, message in turns:
        if role != "user" or not message:
            continue
        for pattern in _NAME_PATTERNS:
            for match in pattern.finditer(message):
                words = match.group(1).split()
                kept: list[str] = []
                for word in words:
                    clean = word.strip("'-")
                    if not clean or clean.lower() in _NOT_NAMES:
                        break
                    kept.append(clean[:1].upper() + clean[1:])
                if kept:
                    return " ".join(kept)[:60]
    return None


# --- the post-call event -------------------------------------------------------------------------


def transcript_turns(data: PostCallData) -> Turns:
    """The call's turns with text, as (role, message)."""
    return [(t.role, t.message.strip()) for t in data.transcript if t.message and t.message.strip()]


def transcript_text(turns: Sequence[tuple[str, str]]) -> str:
    """The transcript stored as the call interaction's raw content (`Agent: ...` / `User: ...`)."""
    return prompts.voice_transcript(turns, limit=10**9)


def caller_number(data: PostCallData) -> str | None:
    """The caller's number as the event gives it: metadata.phone_call.external_number, the
    client data's system__caller_id, or metadata.caller_id."""
    phone_call = data.metadata.get("phone_call")
    dynamic = (data.conversation_initiation_client_data or {}).get("dynamic_variables")
    for value in (
        phone_call.get("external_number") if isinstance(phone_call, dict) else None,
        dynamic.get("system__caller_id") if isinstance(dynamic, dict) else None,
        data.metadata.get("caller_id"),
    ):
        if isinstance(value, str) and value.strip():
            return value
    return None


def _error(status: int, code: str, message: str, field: str, hint: str | None = None) -> CortexError:
    return CortexError(status, code, message, field, hint)


def parse_signature(header: str | None) -> tuple[int, list[str]]:
    """`t=<unix seconds>,v0=<hex>[,v0=...]` as (t, [signatures]); 401 naming the header otherwise."""
    if not header or not header.strip():
        raise _error(401, "unauthorized", f"{SIGNATURE_HEADER} is missing", SIGNATURE_HEADER,
                     "the platform signs every post-call webhook: t=<timestamp>,v0=<hmac>")  # fmt: skip
    stamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.strip().isdigit():
            stamp = int(value.strip())
        elif key == "v0" and re.fullmatch(r"[0-9a-fA-F]{64}", value.strip()):
            signatures.append(value.strip().lower())
    if stamp is None or not signatures:
        raise _error(401, "unauthorized", f"{SIGNATURE_HEADER} must be t=<timestamp>,v0=<hex HMAC-SHA256>",
                     SIGNATURE_HEADER)  # fmt: skip
    return stamp, signatures


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The v0 signature of a body: hex HMAC-SHA256 with the secret over "{timestamp}.{body}"."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """An `ElevenLabs-Signature` value for `body` (what the platform sends; tests and the benchmark sign with it)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return f"t={stamp},v0={signature(secret, stamp, body)}"


async def _owner_rows(function: str, **args: Any) -> list[dict[str, Any]]:
    pool = await db.get_async_pool()
    async with pool.connection() as conn:
        return await db.arows(conn, function, **args)


async def _owner_call(function: str, **args: Any) -> Any:
    pool = await db.get_async_pool()
    async with pool.connection() as conn:
        return await db.acall(conn, function, **args)


async def accept_post_call(raw: bytes, signature_value: str | None, now: float | None = None) -> dict[str, Any]:
    """The post-call webhook, checked in this order: the signature header's shape and the
    timestamp's tolerance (401), the JSON (400), the platform agent (404 when no tenant maps it),
    the HMAC against that tenant's post-call secret (401), the event's fields (422 naming the field),
    then the call is recorded once per conversation id with its job. A replay answers duplicate=true."""
    settings = get_settings()
    stamp, signatures = parse_signature(signature_value)
    now = time.time() if now is None else now
    if abs(now - stamp) > settings.voice_signature_tolerance_seconds:
        tolerance = settings.voice_signature_tolerance_seconds
        raise _error(401, "unauthorized", f"{SIGNATURE_HEADER} timestamp is outside the tolerance of "
                     f"{tolerance} s (stale or replayed)", SIGNATURE_HEADER)  # fmt: skip
    body = parse_json(raw)
    data = body.get("data") if isinstance(body, dict) else None
    agent_id = data.get("agent_id") if isinstance(data, dict) else None
    if not isinstance(agent_id, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", agent_id):
        raise _error(422, "validation_error", "data.agent_id: the platform agent id is required", "data.agent_id")
    candidates = await _owner_rows("cortex.voice_post_call_secrets", p_platform_agent_id=agent_id)
    if not candidates:
        raise _error(404, "not_found", f'unknown voice agent "{agent_id}"', "data.agent_id",
                     "map it first: cortex voice agents add PLATFORM_ID --agent NAME, and set the post-call "
                     "secret: cortex voice secrets --post-call-secret ...")  # fmt: skip
    match = next(
        (
            c
            for c in candidates
            if any(hmac.compare_digest(signature(str(c["secret"]), stamp, raw), s) for s in signatures)
        ),
        None,
    )
    if match is None:
        raise _error(401, "unauthorized", f"{SIGNATURE_HEADER} does not match the body", SIGNATURE_HEADER,
                     "sign with the post-call webhook's secret over \"{t}.{raw body}\"")  # fmt: skip
    event = validate(PostCallEvent, body, "body")
    if event.type != "post_call_transcription":
        return {"received": True, "ignored": event.type[:100]}
    call = validate(TranscriptionEvent, body, "body").data
    turns = transcript_turns(call)
    if not turns:
        raise _error(422, "validation_error", "data.transcript: the call has no text", "data.transcript",
                     "a transcript is a list of {role, message} turns with text")  # fmt: skip
    size = sum(len(m) for _, m in turns)
    if size > settings.voice_max_transcript_chars:
        raise _error(422, "validation_error", f"data.transcript: {size} characters, more than "
                     f"{settings.voice_max_transcript_chars}", "data.transcript")  # fmt: skip
    number = caller_number(call)
    if number is None:
        raise _error(422, "validation_error", "the caller's number is missing",
                     "data.metadata.phone_call.external_number")  # fmt: skip
    try:
        phone = e164(number)
    except ValueError as exc:
        raise _error(422, "validation_error", f"the caller's number: {exc}",
                     "data.metadata.phone_call.external_number") from None  # fmt: skip
    result: dict[str, Any] = await _owner_call(
        "cortex.voice_accept_call",
        p_tenant_id=str(match["tenant_id"]),
        p_conversation_id=call.conversation_id,
        p_platform_agent_id=agent_id,
        p_agent=str(match["agent"]),
        p_phone=phone,
        p_event=db.Jsonb(body),
    )
    return {"received": True, "conversation_id": call.conversation_id, "duplicate": bool(result.get("duplicate"))}


# --- call start -------------------------------------------------------------------------------------

SECRET_CACHE_SECONDS = 30.0
SECRET_CACHE_MAX = 10_000
# sha256(secret) + platform agent id -> (claims, monotonic expiry); positive answers only.
_secret_cache: dict[str, tuple[dict[str, str], float]] = {}
_secret_lock = threading.Lock()
_now: Callable[[], float] = time.monotonic


def clear_secret_cache() -> None:
    """Forgets the cached client-data logins (tests; after rotating a secret the old one works for up to 30 s)."""
    with _secret_lock:
        _secret_cache.clear()


async def _secret_claims(secret: str, agent_id: str) -> dict[str, str]:
    key = hashlib.sha256(secret.encode()).hexdigest() + ":" + agent_id
    now = _now()
    with _secret_lock:
        hit = _secret_cache.get(key)
        if hit is not None and hit[1] > now:
            return dict(hit[0])
    found = await _owner_call("cortex.voice_authenticate", p_secret=secret, p_platform_agent_id=agent_id)
    if not found:
        raise Fallback("unauthorized", f"no tenant has this {SECRET_HEADER} and voice agent {agent_id}")
    claims = {"role": "authenticated", "tenant_id": str(found["tenant_id"]), "agent": str(found["agent"])}
    with _secret_lock:
        if len(_secret_cache) >= SECRET_CACHE_MAX:
            _secret_cache.clear()
        _secret_cache[key] = (claims, now + SECRET_CACHE_SECONDS)
    return claims


_CANONICAL = re.compile(E164_PATTERN)


def caller_lookup_number(raw: str) -> str:
    """The number to look a caller up by at call start. Already canonical E.164 (what the platform
    sends) it is used as is: only numbers that passed `e164` (the phonenumbers library) were ever
    stored, so one that would not validate is simply not found, and the answer is the same empty
    default, without the library's cost (about 0.7 ms a number) on the hot path. Anything else goes
    through `e164`; Fallback("invalid_caller_id") when it is no phone number."""
    if _CANONICAL.match(raw):
        return raw
    try:
        return e164(raw)
    except ValueError as exc:
        raise Fallback("invalid_caller_id", str(exc)) from None


async def client_data(request: Any) -> str:
    """The client-data answer as JSON text, or `Fallback` with the reason (the route answers the
    empty default then). No model and no network: at most one lookup of the secret (cached), then
    one round trip to public.voice_client_data."""
    try:
        raw = await read_body(request, CLIENT_DATA_MAX_BYTES)
        body = parse_json(raw)
        asked = validate(ClientDataRequest, body, "body")
    except CortexError as exc:
        raise Fallback("invalid_request", exc.message) from None
    phone = caller_lookup_number(asked.caller_id)
    secret = request.headers.get(SECRET_HEADER)
    if secret:
        claims = await _secret_claims(secret.strip(), asked.agent_id)
    else:
        try:
            claims = await auth.authenticate_async(request.headers)
        except CortexError as exc:
            raise Fallback("unauthorized", exc.message) from None
    text = await db.acall_as_text(claims, "voice_client_data", agent_id=asked.agent_id, caller_id=phone)
    if text == "null":
        raise Fallback("unknown_agent", f"voice agent {asked.agent_id} is not {claims.get('agent')}'s")
    return text


# --- the platform's agents API -------------------------------------------------------------------------


def fetch_platform_profile(platform_agent_id: str, api_key: str | None) -> dict[str, Any]:
    """A voice agent's profile from the platform: GET {base}/v1/convai/agents/{agent_id} with the
    `xi-api-key` header; its name, conversation_config.agent.first_message and
    conversation_config.agent.prompt.prompt. Raises CortexError (502) when it cannot be had."""
    settings = get_settings()
    key = api_key or settings.voice_platform_api_key
    if not key:
        raise CortexError(502, "platform_unavailable", "no platform API key: cortex voice secrets --platform-api-key")
    url = f"{settings.voice_platform_url.rstrip('/')}/v1/convai/agents/{platform_agent_id}"
    try:
        response = httpx.get(url, headers={"xi-api-key": key}, timeout=settings.voice_platform_timeout_seconds)
    except httpx.HTTPError as exc:
        raise CortexError(502, "platform_unavailable", f"agents API unreachable: {exc}") from exc
    if response.status_code != 200:
        raise CortexError(502, "platform_unavailable", f"agents API answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError as exc:
        raise CortexError(502, "platform_unavailable", "agents API answered no JSON") from exc
    agent = ((body.get("conversation_config") or {}).get("agent") or {}) if isinstance(body, dict) else {}
    prompt = agent.get("prompt") if isinstance(agent, dict) else None
    return {
        "name": body.get("name") if isinstance(body, dict) else None,
        "first_message": agent.get("first_message") if isinstance(agent, dict) else None,
        "system_prompt": prompt.get("prompt") if isinstance(prompt, dict) else None,
    }


# --- the worker -----------------------------------------------------------------------------------------


def process_call(conn: psycopg.Connection[Any], tenant_id: str, conversation_id: str) -> dict[str, Any]:
    """The voice_post_call job: profile (cache, else the agents API), name, tier 2 (budgeted model
    call or the local generator), then `cortex.voice_store_call` and the settlement in one
    transaction. Idempotent: a call stored already is skipped."""
    material = db.call(conn, "cortex.voice_call_material", p_tenant_id=tenant_id, p_conversation_id=conversation_id)
    if material is None:
        return {"skipped": "call not found", "conversation_id": conversation_id}
    if material["status"] == "done":
        return {"skipped": "already stored", "conversation_id": conversation_id}
    profile = dict(material["profile"])
    if not material["profile_fresh"]:
        try:
            fetched = fetch_platform_profile(material["platform_agent_id"], material.get("platform_api_key"))
            db.call(conn, "cortex.voice_store_profile", p_tenant_id=tenant_id,
                    p_platform_agent_id=material["platform_agent_id"], p_profile=fetched)  # fmt: skip
            profile.update({k: v for k, v in fetched.items() if v is not None})
            if fetched.get("name"):
                profile["agent_name"] = fetched["name"]
        except CortexError as exc:
            # The greeting is still written, from the stale (or empty) profile; the next call tries again.
            log.warning("voice: profile of %s not fetched: %s", material["platform_agent_id"], exc.message)
    call = PostCallData.model_validate(material["event"]["data"])
    turns = transcript_turns(call)
    found = extract_name(turns)
    caller = material.get("caller") or {}
    state = material.get("state") or {}
    caller_profile = {
        "name": caller.get("name") or found,
        "phone_number": material["phone"],
        "total_interactions": int(caller.get("total_interactions") or 0) + 1,
        "conversation_count": int(state.get("conversation_count") or 0) + 1,
    }
    meta = {
        "duration_secs": call.metadata.get("call_duration_secs"),
        "call_date": call.metadata.get("start_time_unix_secs"),
    }
    prompt = prompts.voice_state_prompt(profile, caller_profile, turns, meta)
    plan = budget.reserve(conn, tenant_id, material["agent"], OPERATION, budget.estimate(prompt))
    try:
        result, usage = llm.generate_voice_state(profile, caller_profile, turns, meta, **plan.llm_args())
    except llm.LLMError as exc:
        with conn.transaction():
            budget.settle(conn, plan, budget.failed_usage(plan, exc))
        raise
    with conn.transaction():
        stored: dict[str, Any] = db.call(
            conn,
            "cortex.voice_store_call",
            p_tenant_id=tenant_id,
            p_conversation_id=conversation_id,
            p_name=db.typed(found, "text"),  # null (not said) is an argument, not absent
            p_state=result.model_dump(),
            p_transcript=transcript_text(turns),
            p_usage={**asdict(usage), "budget_exceeded": plan.local},
        )
        budget.settle(
            conn, plan, usage, contact_id=stored.get("contact_id"), interaction_id=stored.get("interaction_id")
        )
    return {**stored, "model": usage.model, "budget_action": plan.action, "conversation_id": conversation_id}


# --- reads and admin calls (CLI and HTTP share them) ------------------------------------------------------


def get_caller(claims: Claims, phone: str) -> dict[str, Any]:
    """A caller's tier 1 and the calling agent's own tier 2 (public.get_voice_caller)."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_voice_caller", phone=phone)
    return result


def correct_name(claims: Claims, phone: str, name: str | None) -> dict[str, Any]:
    """An operator's explicit correction of a caller's name (the contact's name; a call never
    overwrites it): update_contact, then the caller as read again."""
    caller = get_caller(claims, phone)
    with db.as_caller(claims) as conn:
        db.call(conn, "update_contact", contact_id=str(caller["contact_id"]), patch={"name": name})
    return get_caller(claims, phone)


def list_agents(claims: Claims) -> dict[str, Any]:
    """The tenant's voice agents and the profile cache's hit rate (public.list_voice_agents)."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "list_voice_agents")
    return result


def add_agent(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Maps a platform agent to a Cortex agent, with a manual profile if given (public.add_voice_agent)."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "add_voice_agent", **fields)
    return result


def set_secrets(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Sets the tenant's voice secrets (public.set_voice_secrets); a new client-data secret is returned once."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "set_voice_secrets", **fields)
    return result
