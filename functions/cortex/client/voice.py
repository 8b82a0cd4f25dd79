"""The SDK's voice methods (routes under /api/v1/voice/callers/)."""

from __future__ import annotations

from typing import Any

from cortex.client._core import Op, amethod, checked, dump, method, parser, segment
from cortex.voice.models import (
    CallerPath,
    VoiceAgent,
    VoiceAgentCreate,
    VoiceAgentList,
    VoiceCaller,
    VoiceSecrets,
    VoiceSecretsUpdate,
)


def get_voice_caller(phone: str, /) -> Op[VoiceCaller]:
    """GET /voice/callers/<phone>: A caller by phone: the shared profile and the calling agent's own state."""
    where = checked(CallerPath, None, {"phone": phone}, "path")
    return Op("get_voice_caller", "GET", f"/voice/callers/{segment(where.phone)}", parser(VoiceCaller))


def list_voice_agents() -> Op[VoiceAgentList]:
    """GET /voice/agents: Voice agents and the profile cache's hit rate."""
    return Op("list_voice_agents", "GET", "/voice/agents", parser(VoiceAgentList))


def add_voice_agent(body: VoiceAgentCreate | None = None, /, **fields: Any) -> Op[VoiceAgent]:
    """POST /voice/agents: Map a voice platform agent to a Cortex agent (admins)."""
    body = checked(VoiceAgentCreate, body, fields, "body")
    return Op("add_voice_agent", "POST", "/voice/agents", parser(VoiceAgent), body=dump(body))


def set_voice_secrets(body: VoiceSecretsUpdate | None = None, /, **fields: Any) -> Op[VoiceSecrets]:
    """POST /voice/secrets: Set the tenant's voice webhook secrets (admins)."""
    body = checked(VoiceSecretsUpdate, body, fields, "body")
    return Op("set_voice_secrets", "POST", "/voice/secrets", parser(VoiceSecrets), body=dump(body))


class Methods:
    """voice: the Client's methods."""

    get_voice_caller = method(get_voice_caller)
    list_voice_agents = method(list_voice_agents)
    add_voice_agent = method(add_voice_agent)
    set_voice_secrets = method(set_voice_secrets)


class AsyncMethods:
    """voice: the AsyncClient's methods."""

    get_voice_caller = amethod(get_voice_caller)
    list_voice_agents = amethod(list_voice_agents)
    add_voice_agent = amethod(add_voice_agent)
    set_voice_secrets = amethod(set_voice_secrets)
