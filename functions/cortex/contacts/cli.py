"""The `cortex` commands of contacts."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import click

from cortex.console import current_state, emit, key_values, table, when
from cortex.contacts import service as contacts_svc

# --- contacts ------------------------------------------------------------------------------------


def _contact_text(c: Mapping[str, Any]) -> str:
    # A caller known by phone only has no email: named by its number.
    identity = c.get("email") or c.get("phone") or "-"
    title = c.get("name") or identity
    lines = [f"{title} <{identity}>  [{c['stage']}]" + ("  (created)" if c.get("created") else "")]
    fields = [
        ("id", c.get("id")),
        ("company", c.get("company_name")),
        ("phone", c.get("phone")),
        ("source", c.get("source")),
        ("owner", " / ".join(str(x) for x in (c.get("owner_agent"), c.get("owner_human_id")) if x) or None),
        ("tags", ", ".join(c.get("tags") or []) or None),
        ("custom", ", ".join(f"{k}={v}" for k, v in (c.get("custom_fields") or {}).items()) or None),
        (
            "touches",
            f"{c.get('interaction_count', 0)} (first {when(c.get('first_touch_at'))}, last "
            f"{when(c.get('last_touch_at'))}" + (f" by {c['last_touch_agent']})" if c.get("last_touch_agent") else ")"),
        ),
        ("customer", when(c["converted_at"]) if c.get("converted_at") else None),
    ]
    lines += [f"  {k + ':':<9} {v}" for k, v in fields if v]
    return "\n".join(lines)


_CONTACT_COLUMNS = [
    ("id", "id"),
    ("name", "name"),
    ("email", "email"),
    ("company_name", "company"),
    ("stage", "stage"),
    ("owner_agent", "owner"),
    ("tags", "tags"),
    ("last_touch_at", "last touch"),
]


@click.group()
def contacts() -> None:
    """Contacts: upsert, get, update, search."""


@contacts.command("upsert")
@click.option("--email", help="Email (the contact's identity in the tenant); required unless --phone is given.")
@click.option("--name")
@click.option("--company-name")
@click.option("--phone", help="International number (E.164 once normalised); the identity without --email.")
@click.option("--stage", help="prospect, qualified, opportunity, customer, churning, lost or recovered.")
@click.option("--source", help="How they came in, e.g. anna_outbound, inbound_form, referral.")
@click.option("--owner-agent")
@click.option("--owner-human-id")
@click.option("--tag", "tags", multiple=True, help="Repeatable; tags accumulate.")
@click.option("--custom-field", "custom", multiple=True, help="k=v or k:=json; repeatable; fields merge.")
def contacts_upsert(
    email: str | None,
    name: str | None,
    company_name: str | None,
    phone: str | None,
    stage: str | None,
    source: str | None,
    owner_agent: str | None,
    owner_human_id: str | None,
    tags: tuple[str, ...],
    custom: tuple[str, ...],
) -> None:
    """Create or update the contact with this email, or this phone without one (upsert_contact)."""
    if email is None and phone is None:
        raise click.UsageError("Missing option '--email' (or '--phone' for a contact known by phone only).")
    custom_fields = key_values(custom, "--custom-field") if custom else None
    result = contacts_svc.upsert_contact(
        current_state().claims(),
        email=email,
        name=name,
        company_name=company_name,
        phone=phone,
        stage=stage,
        source=source,
        owner_agent=owner_agent,
        owner_human_id=owner_human_id,
        tags=list(tags) or None,
        custom_fields=custom_fields,
    )
    emit(result, lambda: click.echo(_contact_text(result)))


@contacts.command("get")
@click.argument("contact_id", type=click.UUID)
def contacts_get(contact_id: uuid.UUID) -> None:
    """Show one contact (get_contact)."""
    result = contacts_svc.get_contact(current_state().claims(), str(contact_id))
    emit(result, lambda: click.echo(_contact_text(result)))


@contacts.command("update")
@click.argument("contact_id", type=click.UUID)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Set a field (FIELD:=json for JSON; tags=a,b for a list); repeatable.",
)
@click.option("--clear", "clears", multiple=True, metavar="FIELD", help="Clear a field (set it to null).")
def contacts_update(contact_id: uuid.UUID, sets: tuple[str, ...], clears: tuple[str, ...]) -> None:
    """Change some fields of a contact (update_contact); the others stay."""
    if not sets and not clears:
        raise click.UsageError("nothing to change: give --set FIELD=VALUE or --clear FIELD")
    patch = key_values(sets, "--set")
    if isinstance(patch.get("tags"), str):
        patch["tags"] = [t.strip() for t in patch["tags"].split(",") if t.strip()]
    patch.update(dict.fromkeys(clears))
    result = contacts_svc.update_contact(current_state().claims(), str(contact_id), patch)
    emit(result, lambda: click.echo(_contact_text(result)))


@contacts.command("search")
@click.option("--stage")
@click.option("--owner-agent")
@click.option("--owner-human-id")
@click.option("--tag")
@click.option("--search", help="Fuzzy match on name, email and company.")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--offset", type=int, default=0, show_default=True)
def contacts_search(
    stage: str | None,
    owner_agent: str | None,
    owner_human_id: str | None,
    tag: str | None,
    search: str | None,
    limit: int,
    offset: int,
) -> None:
    """List contacts by stage, owner, tag or fuzzy search (search_contacts)."""
    result = contacts_svc.search_contacts(
        current_state().claims(),
        stage=stage,
        owner_agent=owner_agent,
        owner_human_id=owner_human_id,
        tag=tag,
        search=search,
        limit=limit,
        offset=offset,
    )

    def human() -> None:
        items = [{**c, "last_touch_at": when(c.get("last_touch_at"))} for c in result["items"]]
        click.echo(table(items, _CONTACT_COLUMNS, width=32) if items else "no contacts match")
        if len(items) == result["limit"]:
            click.echo(f"(first {result['limit']} from offset {result['offset']}; use --offset for more)")

    emit(result, human)
