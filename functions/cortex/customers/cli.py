"""`cortex customers ...`: a customer's context, and a chat with the customer agents in the terminal."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from cortex import db
from cortex.console import current_state, emit
from cortex.customers import controller, service
from cortex.customers.models import UIMessage


@click.group()
def customers() -> None:
    """Customer agents (seed 002): context, and chat with customer_mgmt and product_mgmt."""


@customers.command("context")
@click.argument("customer_id")
@click.option("--max-tokens", type=click.IntRange(200, 20000), default=3000, show_default=True)
def customers_context(customer_id: str, max_tokens: int) -> None:
    """The context the agents see for CUSTOMER_ID (build_customer_context)."""
    text = service.build_context(current_state().claims(), customer_id, max_tokens)
    emit({"customer_id": customer_id, "context": text, "tokens": service.estimate(text)}, text)


async def _chat(claims: dict[str, str], customer_id: str, message: str) -> list[dict[str, Any]]:
    try:
        chat = await service.start_chat(claims, customer_id)
        messages = [UIMessage(role="user", content=message)]
        return [chunk async for chunk in controller.run_chat(chat, messages)]
    finally:
        await db.aclose_pool()


def _print(parts: list[dict[str, Any]]) -> None:
    for part in parts:
        kind = part["type"]
        if kind == "data-agent":
            click.echo(f"\n[{part['data']['agent']}]")
        elif kind == "text-delta":
            click.echo(part["delta"], nl=False)
        elif kind in ("tool-input-available",):
            click.echo(f"\n  -> {part['toolName']} {part['input']}")
        elif kind == "tool-output-error":
            click.echo(f"\n  !! {part['errorText']}")
        elif kind == "data-handoff":
            click.echo(f"\n  handoff {part['data']['from']} -> {part['data']['to']}: {part['data']['reason']}")
        elif kind == "error":
            click.echo(f"\nerror: {part['errorText']}")
    click.echo()


@customers.command("chat")
@click.argument("customer_id")
@click.argument("message")
def customers_chat(customer_id: str, message: str) -> None:
    """Send MESSAGE to the customer agents about CUSTOMER_ID and print the streamed answer
    (Claude with ANTHROPIC_API_KEY, else the deterministic local agent). Acts as --agent
    (customer_mgmt, product_mgmt or an admin)."""
    parts = asyncio.run(_chat(current_state().claims(), customer_id, message))
    emit(parts, lambda: _print(parts))
