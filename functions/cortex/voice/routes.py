"""HTTP routes of voice: `/api/v1/voice` (the platform's two webhooks, callers, voice agents, secrets)."""

from __future__ import annotations

import asyncio
import logging

from starlette.concurrency import run_in_threadpool

from cortex import db
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.routing import Call, RawJSON, Reply, Router, read_body
from cortex.schemas import e164
from cortex.voice import service
from cortex.voice.models import (
    CallerPath,
    ClientDataResponse,
    PostCallAck,
    VoiceAgent,
    VoiceAgentCreate,
    VoiceAgentList,
    VoiceCaller,
    VoiceSecrets,
    VoiceSecretsUpdate,
)

router = Router("voice")
log = logging.getLogger("cortex.voice")
FALLBACK_HEADER = "X-Voice-Fallback"


@router.route(
    "POST", "/client-data", name="voice_client_data",
    summary="Call start: ElevenLabs conversation-initiation client data for a caller",
    responses={200: ClientDataResponse}, auth=False,
    description="The platform posts {caller_id, agent_id, called_number, call_sid} when a call starts. "
    "Authenticate with the tenant's voice secret in X-Voice-Secret (cortex voice secrets "
    "--rotate-webhook-secret) or an agent key (Authorization: Bearer). One SQL function decides the "
    "answer (no model, no network): the agent's stored greeting as conversation_config_override.agent."
    "first_message, a known name in dynamic_variables, else the empty default. Always 200: any error, "
    "an unknown agent, bad input or a missed deadline (CORTEX_VOICE_DEADLINE_MS, 150 ms) answers the "
    "empty default, logged with the reason, which X-Voice-Fallback also names.",
)  # fmt: skip
async def client_data(call: Call) -> Reply:
    """The answer within the deadline, else the empty default (never an error status)."""
    deadline = get_settings().voice_deadline_ms / 1000
    # Past the deadline the answer is the default, but the lookup is not cancelled: cancelling a query
    # under way costs a cancel request and a rollback, and under load that turns slow answers into a
    # storm of them. It finishes in the background and gives its pooled connection back as usual.
    task = asyncio.ensure_future(service.client_data(call.request))
    done, _ = await asyncio.wait({task}, timeout=deadline)
    try:
        if task not in done:
            _LATE.add(task)
            task.add_done_callback(_forget)
            raise TimeoutError
        return Reply(200, RawJSON(task.result()))
    except service.Fallback as exc:
        reason, detail = exc.reason, exc.detail
    except TimeoutError:
        reason, detail = "deadline", f"no answer within {deadline * 1000:.0f} ms"
    except Exception as exc:  # any failure at all: the call must still start
        reason, detail = "error", f"{type(exc).__name__}: {exc}"
    log.warning("voice client-data answered the empty default (%s): %s", reason, detail[:300])
    return Reply(200, RawJSON(service.DEFAULT_CLIENT_DATA_TEXT), {FALLBACK_HEADER: reason})


# Lookups that missed their deadline and still run: held so they are not collected mid-query, and
# so whoever closes the pool can let them finish first (`settle_late_lookups`).
_LATE: set[asyncio.Future[str]] = set()


def _forget(task: asyncio.Future[str]) -> None:
    """A lookup that missed its deadline: its outcome is read (and dropped) so nothing is reported as lost."""
    _LATE.discard(task)
    if not task.cancelled():
        task.exception()


async def settle_late_lookups(timeout: float = 5.0) -> int:
    """Waits (at most `timeout` seconds) for client-data lookups that missed their deadline; returns
    how many were still running. Call it before closing the pool or the event loop."""
    late = set(_LATE)
    if late:
        await asyncio.wait(late, timeout=timeout)
    return len(late)


@router.route(
    "POST", "/post-call", name="voice_post_call", summary="Call end: the post-call webhook (queued for the worker)",
    responses={200: PostCallAck}, auth=False, errors=(400, 401, 404, 413, 422),
    description="Verifies ElevenLabs-Signature (t=<unix seconds>,v0=<hex HMAC-SHA256 of \"{t}.{raw body}\"> "
    "with the tenant's post-call secret; t within CORTEX_VOICE_SIGNATURE_TOLERANCE, 1800 s), records the "
    "call once per conversation id and answers at once; the worker extracts the name, writes tier 1 and the "
    "agent's tier 2 and logs the call. A replay is acknowledged (duplicate=true) and does nothing; events "
    "other than post_call_transcription are acknowledged and ignored.",
)  # fmt: skip
async def post_call(call: Call) -> Reply:
    """Checks, records and queues one post-call event."""
    raw = await read_body(call.request)
    result = await service.accept_post_call(raw, call.request.headers.get(service.SIGNATURE_HEADER))
    return Reply(200, result)


def _phone(raw: str) -> str:
    try:
        return e164(raw)
    except ValueError as exc:
        raise CortexError(422, "validation_error", f"phone: {exc}", "phone", "for example +16125551234") from None


@router.route(
    "GET", "/callers/<phone>", name="get_voice_caller",
    summary="A caller by phone: the shared profile and the calling agent's own state",
    responses={200: VoiceCaller}, path_params=CallerPath, errors=(404,),
    description="Tier 1 (name, first_seen, total_interactions) and tier 2 of the calling agent only "
    "(null when it never spoke with the caller); another agent's state is never shown.",
)  # fmt: skip
async def get_voice_caller(call: Call) -> Reply:
    """One call to public.get_voice_caller."""
    phone = _phone(call.path_as(CallerPath).phone)
    return Reply(200, RawJSON(await db.acall_as_text(call.claims, "get_voice_caller", phone=phone)))


@router.route(
    "GET", "/agents", name="list_voice_agents", summary="Voice agents and the profile cache's hit rate",
    responses={200: VoiceAgentList},
)  # fmt: skip
async def list_voice_agents(call: Call) -> Reply:
    """One call to public.list_voice_agents."""
    return Reply(200, RawJSON(await db.acall_as_text(call.claims, "list_voice_agents")))


@router.route(
    "POST", "/agents", name="add_voice_agent", summary="Map a voice platform agent to a Cortex agent (admins)",
    responses={200: VoiceAgent}, body=VoiceAgentCreate, errors=(403, 409),
)  # fmt: skip
async def add_voice_agent(call: Call) -> Reply:
    """One call to public.add_voice_agent."""
    body = call.body_as(VoiceAgentCreate)
    return Reply(200, await db.acall_as(call.claims, "add_voice_agent", **body.model_dump(exclude_none=True)))


@router.route(
    "POST", "/secrets", name="set_voice_secrets", summary="Set the tenant's voice webhook secrets (admins)",
    responses={200: VoiceSecrets}, body=VoiceSecretsUpdate, errors=(403,),
    description="rotate_webhook_secret returns a new client-data secret once (stored as SHA-256 only); the "
    "post-call HMAC secret and the platform API key are stored and never shown again.",
)  # fmt: skip
async def set_voice_secrets(call: Call) -> Reply:
    """One call to public.set_voice_secrets."""
    body = call.body_as(VoiceSecretsUpdate)
    result = await run_in_threadpool(service.set_secrets, call.claims, **body.model_dump(exclude_none=True))
    return Reply(200, result)
