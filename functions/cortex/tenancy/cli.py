"""The `cortex` commands of tenancy."""

from __future__ import annotations

import click

from cortex import db
from cortex.console import current_state, emit, table, when
from cortex.errors import CortexError

# --- tenants, agents, keys (owner operations) ----------------------------------------------------


@click.group()
def tenants() -> None:
    """Create and list tenants."""


@tenants.command("create")
@click.argument("name")
@click.argument("slug")
@click.option("--time-zone", default="UTC", show_default=True, help="IANA name, e.g. Europe/Berlin.")
def tenants_create(name: str, slug: str, time_zone: str) -> None:
    """Create a tenant (with its `system` agent and default model prices)."""
    with current_state().connect() as conn:
        tenant_id = db.call(conn, "cortex.create_tenant", p_name=name, p_slug=slug, p_time_zone=time_zone)
    emit(
        {"id": str(tenant_id), "name": name, "slug": slug, "time_zone": time_zone},
        f"created tenant {slug} ({tenant_id})",
    )


@tenants.command("list")
def tenants_list() -> None:
    """List tenants."""
    with current_state().connect() as conn:
        rows = db.rows(conn, "cortex.list_tenants")
    emit(
        rows,
        lambda: click.echo(
            table(
                rows,
                [
                    ("slug", "slug"),
                    ("name", "name"),
                    ("id", "id"),
                    ("time_zone", "time zone"),
                    ("contacts", "contacts"),
                ],
            )
        ),
    )


@click.group()
def agents() -> None:
    """Create and list the agents of a tenant."""


# What `agents create` reports (`agents list` also shows `enabled`).
_AGENT_CREATED = ("name", "display_name", "role", "read_only", "max_input_tokens", "daily_token_budget")


@agents.command("create")
@click.argument("name")
@click.option("--display-name", help="Human-friendly name (e.g. Luna).")
@click.option("--read-only", is_flag=True, help="The agent may read but not write.")
@click.option("--role", help="agent (default), monitor or admin.")
@click.option("--max-input-tokens", type=int, help="Token budget of level-3 context (default 2000).")
@click.option("--daily-budget", type=int, help="Daily token budget (default 100000).")
def agents_create(
    name: str,
    display_name: str | None,
    read_only: bool,
    role: str | None,
    max_input_tokens: int | None,
    daily_budget: int | None,
) -> None:
    """Create (or update) an agent of the tenant and its budget."""
    state = current_state()
    tid = state.tenant_id()
    with state.connect() as conn:
        db.call(
            conn,
            "cortex.create_agent",
            p_tenant_id=tid,
            p_name=name,
            p_display_name=display_name,
            p_role=role,
            p_read_only=read_only,
            p_max_input_tokens=max_input_tokens,
            p_daily_token_budget=daily_budget,
        )
        (agent,) = db.rows(conn, "cortex.list_agents", p_tenant_id=tid, p_name=name)
    row = {k: agent[k] for k in _AGENT_CREATED}
    emit(
        row,
        f"agent {name}: role {row['role']}, read-only {'yes' if row['read_only'] else 'no'}, "
        f"max input {row['max_input_tokens']} tokens, daily budget {row['daily_token_budget']} tokens",
    )


@agents.command("list")
def agents_list() -> None:
    """List the tenant's agents and their budgets."""
    state = current_state()
    with state.connect() as conn:
        rows = db.rows(conn, "cortex.list_agents", p_tenant_id=state.tenant_id())
    emit(
        rows,
        lambda: click.echo(
            table(
                rows,
                [
                    ("name", "name"),
                    ("role", "role"),
                    ("read_only", "read-only"),
                    ("enabled", "enabled"),
                    ("max_input_tokens", "max input"),
                    ("daily_token_budget", "daily budget"),
                ],
            )
        ),
    )


@click.group()
def keys() -> None:
    """Manage agents' API keys (stored hashed: a key is shown once)."""


@keys.command("create")
@click.argument("agent")
@click.option("--label", help="What the key is for.")
def keys_create(agent: str, label: str | None) -> None:
    """Create an API key for AGENT and print it (once)."""
    state = current_state()
    with state.connect() as conn:
        key: str = db.call(conn, "cortex.create_agent_key", p_tenant_id=state.tenant_id(), p_agent=agent, p_label=label)
    emit(
        {"agent": agent, "label": label, "prefix": key.split("_")[1], "key": key},
        f"{key}\n(key for {agent}; shown only now, store it safely)",
    )


@keys.command("revoke")
@click.argument("prefix")
def keys_revoke(prefix: str) -> None:
    """Revoke the key with PREFIX (the part after `ctx_`; a whole key works too)."""
    state = current_state()
    if prefix.startswith("ctx_"):
        prefix = prefix.split("_")[1]
    with state.connect() as conn:
        # Only keys of this tenant: the prefix alone would reach any tenant's key.
        found = db.rows(conn, "cortex.list_agent_keys", p_tenant_id=state.tenant_id(), p_prefix=prefix)
        if not found:
            raise CortexError(
                404,
                "not_found",
                f"no key with prefix {prefix} in this tenant",
                "prefix",
                "see `cortex keys list`",
            )
        row = found[0]
        if row["revoked_at"] is not None:
            raise CortexError(
                409, "already_revoked", f"key {prefix} was already revoked at {row['revoked_at']}", "prefix"
            )
        db.call(conn, "cortex.revoke_agent_key", p_prefix=prefix)
    emit({"prefix": prefix, "agent": row["agent"], "revoked": True}, f"revoked key {prefix} of {row['agent']}")


@keys.command("list")
def keys_list() -> None:
    """List the tenant's keys (prefixes only; keys themselves are not stored)."""
    state = current_state()
    with state.connect() as conn:
        rows = db.rows(conn, "cortex.list_agent_keys", p_tenant_id=state.tenant_id())

    def human() -> None:
        shown = [
            {
                **r,
                "created_at": when(r["created_at"]),
                "last_used_at": when(r["last_used_at"]),
                "revoked_at": when(r["revoked_at"]),
            }
            for r in rows
        ]
        click.echo(
            table(
                shown,
                [
                    ("prefix", "prefix"),
                    ("agent", "agent"),
                    ("label", "label"),
                    ("created_at", "created"),
                    ("last_used_at", "last used"),
                    ("revoked_at", "revoked"),
                ],
            )
        )

    emit(rows, human)
