"""`cortex voice ...`: callers, voice agents and the webhook secrets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from cortex.console import current_state, emit, table, when
from cortex.schemas import e164
from cortex.voice import service


@click.group()
def voice() -> None:
    """Voice agents' two-tier caller memory (seed 004)."""


def _phone(raw: str) -> str:
    try:
        return e164(raw)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="PHONE") from None


def _caller_text(c: Mapping[str, Any]) -> str:
    lines = [
        f"{c.get('name') or '(name unknown)'}  {c['phone']}",
        f"  contact      {c['contact_id']}",
        f"  first seen   {when(c.get('first_seen'))}, {c.get('total_interactions')} call(s), "
        f"last {when(c.get('last_call_at'))}",
    ]
    state = c.get("state")
    if not state:
        lines.append(f"  {c.get('agent')}: no calls with this caller yet")
    else:
        lines += [
            f"  {state['agent']}: {state['conversation_count']} call(s), last {when(state.get('last_call_date'))}, "
            f"{state['sentiment']}",
            f"  greeting     {state['next_greeting']}",
            f"  topics       {', '.join(state['key_topics'])}",
            f"  summary      {state['conversation_summary']}",
        ]
    return "\n".join(lines)


@voice.command("caller")
@click.argument("phone")
@click.option("--name", help="Correct the caller's name (an operator's correction; calls never overwrite a name).")
def voice_caller(phone: str, name: str | None) -> None:
    """Show a caller: its profile and the acting agent's own state (get_voice_caller)."""
    claims = current_state().claims()
    number = _phone(phone)
    caller = service.correct_name(claims, number, name) if name else service.get_caller(claims, number)
    emit(caller, lambda: click.echo(_caller_text(caller)))


@voice.group("agents")
def voice_agents() -> None:
    """Voice platform agents mapped to Cortex agents."""


@voice_agents.command("add")
@click.argument("platform_agent_id")
@click.option("--agent", required=True, help="The Cortex agent this voice agent is.")
@click.option("--name", help="Register the profile by hand: the agent's name...")
@click.option("--first-message", help="...its first message...")
@click.option("--system-prompt", help="...and its system prompt (else fetched from the platform, cached 24 h).")
def voice_agents_add(
    platform_agent_id: str, agent: str, name: str | None, first_message: str | None, system_prompt: str | None
) -> None:
    """Map PLATFORM_AGENT_ID to a Cortex agent (admins; add_voice_agent)."""
    result = service.add_agent(
        current_state().claims(),
        platform_agent_id=platform_agent_id,
        agent=agent,
        name=name,
        first_message=first_message,
        system_prompt=system_prompt,
    )
    emit(result, f"{result['platform_agent_id']} -> {result['agent']} (profile: {result['profile_source']})")


@voice_agents.command("list")
def voice_agents_list() -> None:
    """The voice agents and the profile cache's hit rate (list_voice_agents)."""
    result = service.list_agents(current_state().claims())

    def human() -> None:
        columns = [("platform_agent_id", "platform agent"), ("agent", "agent"), ("name", "name"),
                   ("profile_source", "profile"), ("profile_hits", "hits"), ("profile_misses", "misses"),
                   ("hit_rate", "hit rate")]  # fmt: skip
        click.echo(table(result["items"], columns))
        cache = result["cache"]
        rate = "-" if cache["hit_rate"] is None else f"{cache['hit_rate']:.1%}"
        click.echo(f"profile cache: {cache['hits']} hits, {cache['misses']} misses, hit rate {rate} "
                   f"(target over {cache['target']:.0%}, TTL {cache['ttl_hours']} h)")  # fmt: skip

    emit(result, human)


@voice.command("secrets")
@click.option(
    "--rotate-webhook-secret", is_flag=True, help="Make a new client-data secret (X-Voice-Secret), shown once."
)
@click.option("--post-call-secret", help="The post-call webhook's HMAC secret, as the platform shows it.")
@click.option("--platform-api-key", help="The platform API key (xi-api-key) for its agents API.")
def voice_secrets(rotate_webhook_secret: bool, post_call_secret: str | None, platform_api_key: str | None) -> None:
    """Set the tenant's voice secrets (admins; set_voice_secrets)."""
    result = service.set_secrets(
        current_state().claims(),
        rotate_webhook_secret=rotate_webhook_secret,
        post_call_secret=post_call_secret,
        platform_api_key=platform_api_key,
    )

    def human() -> None:
        if result.get("webhook_secret"):
            click.echo(f"client-data secret (send as X-Voice-Secret; shown once): {result['webhook_secret']}")
        click.echo(f"post-call secret set: {'yes' if result['post_call_secret_set'] else 'no'}; "
                   f"platform API key set: {'yes' if result['platform_api_key_set'] else 'no'}")  # fmt: skip

    emit(result, human)
