"""Seed 001's qualitative test, automated: does a briefing carry what MEMORY.md and AGENTS.md said?

A generated MEMORY.md and AGENTS.md for a support agent of a small team (facts, decisions,
rules and conventions, preferences, goals, a few dated events, about agents and customers) are
ingested for that agent; then the agent's briefing is read (public.get_briefing, markdown, the
default 8,000 characters) and each known item is looked for by its title in the briefing's text.

    recall = items named in the briefing / items that fit the budget

An item "fits the budget" when the briefing has room for it: the denominator is the number of
known items, capped at the briefing's item limit (max_total_items, 50) and at how many rendered
items the character budget holds (max_chars / the mean rendered length of the known items). The
figure is printed; the test asserts at least 0.8.
"""

from __future__ import annotations

import re
from typing import Any

from cortex import db
from cortex.ingest import service
from tests.conftest import AsAgent, Tenant

AGENT = "luna"

# (title, kind the ingest should give it): the bullets of the two files, in order.
MEMORY_ITEMS: dict[str, list[str]] = {
    "Team": [
        "Luna answers first-line support for Top Cup by email and chat.",
        "Mia owns the enterprise accounts and their renewals.",
        "Jasper handles upsells once a customer asks about volume pricing.",
        "Anna runs the voice line and books callbacks.",
    ],
    "Customers": [
        "Acme Corp orders 2000 cups a quarter through John Smith.",
        "Globex pays by invoice with 30-day terms.",
        "Initech's office moved to Rotterdam in the spring.",
    ],
    "Decisions": [
        "We decided to ship enterprise orders by sea freight from now on.",
        "Chose Stripe over PayPal for the new web checkout.",
        "Picked Zendesk as the single inbox for email and chat.",
    ],
    "Preferences": [
        "John Smith prefers email over phone calls.",
        "Mike likes a short daily summary at 9:00 instead of pings.",
        "Globex's buyer hates automated follow-ups.",
    ],
    "Goals": [
        "Goal: first reply to every ticket within one hour.",
        "Target of 95 percent customer satisfaction this quarter.",
    ],
    "Log": [
        "2024-05-02: the Rotterdam warehouse went live for EU orders.",
        "2024-05-14: v2 of the order portal deployed to all customers.",
    ],
}

AGENTS_ITEMS: dict[str, list[str]] = {
    "Rules": [
        "Always confirm the delivery address before an order ships.",
        "Never promise a delivery date that the warehouse has not confirmed.",
        "Refunds above 500 EUR need Mia's approval.",
        "Hand a contact to Jasper when it asks about volume pricing.",
    ],
    "Conventions": [
        "Lesson: write the order number in the subject line of every reply.",
        "Tag churn risks with churn_risk and tell Mia the same day.",
        "Sign emails as Luna from Top Cup support.",
    ],
}


def _markdown(title: str, sections: dict[str, list[str]]) -> bytes:
    parts = [f"# {title}\n"]
    for heading, items in sections.items():
        parts.append(f"\n## {heading}\n")
        parts += [f"- {item}\n" for item in items]
    return "".join(parts).encode()


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def test_a_briefing_after_ingest_names_what_memory_md_and_agents_md_said(
    tenant: Tenant, as_agent: AsAgent, capsys: Any
) -> None:
    claims = db.agent_claims(tenant.id, AGENT)
    memory = service.ingest_bytes(claims, "MEMORY.md", _markdown("Luna's memory", MEMORY_ITEMS))
    agents = service.ingest_bytes(claims, "AGENTS.md", _markdown("How the Top Cup team works", AGENTS_ITEMS))
    known = [item for sections in (MEMORY_ITEMS, AGENTS_ITEMS) for items in sections.values() for item in items]
    assert memory["chunks"] + agents["chunks"] == len(known)
    assert memory["created"] + agents["created"] == len(known)

    with as_agent(tenant, AGENT) as conn:
        briefing: dict[str, Any] = db.call(conn, "get_briefing", agent=AGENT, format="markdown")
    text = _norm(briefing["text"])
    shown = {_norm(i["title"]) for s in briefing["sections"] for i in s["items"]}

    named = [item for item in known if _norm(item) in text or _norm(item) in shown]
    missing = [item for item in known if item not in named]
    max_chars = int(briefing.get("max_chars") or 8000)
    rendered = sum(len(f"- **{item}** (fact): ") for item in known) / len(known)
    fits = min(len(known), 50, int(max_chars // rendered))
    recall = len(named) / fits
    with capsys.disabled():
        print(f"\ningest recall: {len(named)} of {fits} items that fit the budget named = {recall:.2f}")
        for item in missing:
            print(f"  missing: {item}")
    assert len(briefing["text"]) <= max_chars
    assert recall >= 0.8, f"recall {recall:.2f}; missing: {missing}"
