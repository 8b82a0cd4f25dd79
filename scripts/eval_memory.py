#!/usr/bin/env python3
"""Retrieval quality of the memory graph (issue 13): recall@5/10/20 and MRR of text-only,
vector-only and hybrid search, per question style, plus "as of" accuracy.

usage: eval_memory.py [--seed 13] [--json PATH] [--transport inprocess|serve] [--keep]

What it does, in order:
1. A fresh database (cortex_eval_<seed>, dropped and migrated), one tenant with the agents luna,
   mia, jasper and anna and a key each (set up in SQL, as an operator does with the CLI).
2. A seeded data set fed through the public HTTP API only:
   - 20 contacts (POST /contacts), among them look-alike names (Maria Lopez, Mario Lopez, Maria
     Lopes; John Smith, Jon Smith, Joan Smyth; Anna Berg, Hanna Berg, Anna Bergman ...);
   - ~150 conversations between the agents and the contacts over the last 11 months, 1-4
     sessions each (POST /interactions/import, with occurred_at; they become event nodes);
   - facts about the contacts (10 attributes: preferred channel, call times, job title, budget,
     delivery warehouse, language, renewal month, competitor, payment terms, hobby), remembered by
     the agent of the session (POST /memories with valid_from = the session's time), then
     restated in other words (a second node), near-exactly repeated (de-duplicated), and
     changed: by the key slot (POST /memories with the same key) or by
     POST /memories/<id>/supersede; plus general memories (policies, decisions, patterns) as
     distractors.
3. The worker's indexing (embeddings with the real local model, then auto-links) run in-process
   until no node is pending (scripts/memindex.py: cortex.queue.worker.run_sweeps).
4. Questions with known answers, in three styles in equal shares, one of each per fact slot:
   lexical (shares the fact's words), semantic (paraphrased: only the contact's name in common)
   and mixed; and "as of" questions (a time T inside the old value's validity, asked with as_of).
   Each question is asked through POST /memories/search three ways: text only (weights text 1,
   vector 0, graph 0), vector only (0, 1, 0) and hybrid (no weights: the tenant's defaults in
   cortex.memory_settings). A result counts for text-only / vector-only only when that ranking
   found it (a zero-weight ranking cannot order anything).

A question's answers are the active memory nodes that state the slot's current value (all of
them: a restatement is a second right answer); for an "as of" question, the nodes of the slot
valid at T. recall@k = share of questions with an answer among the first k results; MRR = mean
of 1 / rank of the first answer (0 when none is in the top 20). "superseded_in_top5" counts
current questions whose top 5 held a superseded value of the slot (it should be 0).

Transport: `inprocess` (default) drives the ASGI app exactly as `functions-framework --asgi
--target api` builds it, through Starlette's TestClient (no socket; one process, so the model is
loaded once for the API's query embedding and the worker); `serve` starts `cortex serve` on a free
loopback port instead. The figures do not depend on it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import ROOT, base_dsn, http_server, machine_info, recreate_database, with_database
from memindex import index_all

from cortex import db
from cortex.config import get_settings

AGENTS = ("luna", "mia", "jasper", "anna")
STYLES = ("lexical", "semantic", "mixed")
MODES = {
    "text": {"text": 1.0, "vector": 0.0, "graph": 0.0},
    "vector": {"text": 0.0, "vector": 1.0, "graph": 0.0},
    "hybrid": None,  # the tenant's defaults (cortex.memory_settings)
}
KS = (5, 10, 20)
DAYS = 335  # about 11 months

# --- the world ----------------------------------------------------------------------------------

CONTACTS = [
    ("Maria Lopez", "Acme Foods"), ("Mario Lopez", "Lopez Logistics"), ("Maria Lopes", "Brightpath Labs"),
    ("John Smith", "Northstar Retail"), ("Jon Smith", "Summit Health"), ("Joan Smyth", "Redwood Analytics"),
    ("Anna Berg", "Harbor Energy"), ("Hanna Berg", "Keystone Builders"), ("Anna Bergman", "Nimbus Software"),
    ("Chen Wei", "Quantum Robotics"), ("Wei Chen", "Atlas Motors"), ("Priya Khan", "Evergreen Pharma"),
    ("Priya Kham", "Vertex Media"), ("Tom Weber", "Falcon Textiles"), ("Tom Webber", "Cobalt Hospitality"),
    ("Luis Costa", "Polaris Outfitters"), ("Lucia Costa", "Meridian Partners"), ("Omar Haddad", "Granite Works"),
    ("Elena Petrova", "Juniper Analytics"), ("Felix Novak", "Sterling Freight"),
]  # fmt: skip


@dataclass(frozen=True)
class Attribute:
    """A kind of fact about a contact: its values, ways to state it and questions about it."""

    name: str
    label: str  # how a conversation refers to it
    kind: str
    values: tuple[str, ...]
    statements: tuple[str, ...]  # [0] is the canonical wording; the others restate it
    change: str  # how a changed value is stated
    near_duplicate: str  # the canonical wording, slightly altered (de-duplication)
    questions: dict[str, str]  # style -> question


ATTRIBUTES = [
    Attribute(
        "channel", "how to reach them", "preference",
        ("email", "phone", "WhatsApp", "Slack", "video call"),
        ("{name} prefers to be contacted by {v}.", "{first} asked us to use {v} rather than anything else.",
         "Reaching {name}: {v} works best, other channels get ignored."),
        "{name} now prefers to be contacted by {v}.",
        "{name} prefers to be contacted by {v}!",
        {"lexical": "Which way does {name} prefer to be contacted?",
         "semantic": "How should I get in touch with {name}?",
         "mixed": "Best channel for {name}, what do they prefer?"},
    ),
    Attribute(
        "call_time", "call times", "preference",
        ("before 10 am", "after 3 pm", "on Friday afternoons", "around lunchtime", "on Monday mornings"),
        ("{name} likes to be called {v}.", "{first} told us to phone {v}, never at other times.",
         "Schedule any conversation with {name} {v}."),
        "{name} now likes to be called {v}.",
        "{name} likes to be called {v} .",
        {"lexical": "When does {name} like to be called?",
         "semantic": "What time of day suits {name} for a conversation on the telephone?",
         "mixed": "What time should we call {name}?"},
    ),
    Attribute(
        "role", "their job", "fact",
        ("head of procurement", "chief financial officer", "operations manager", "office manager", "IT director"),
        ("{name}'s job title is {v} at {company}.", "{first} works at {company} as {v}.",
         "At {company}, {name} holds the {v} position."),
        "{name}'s job title is now {v} at {company}.",
        "{name}'s job title is {v} at {company}",
        {"lexical": "What is {name}'s job title?",
         "semantic": "What position does {name} hold in their organisation?",
         "mixed": "{name} title and role?"},
    ),
    Attribute(
        "budget", "the budget", "fact",
        ("12,000 euros", "25,000 euros", "40,000 euros", "8,000 euros", "60,000 euros"),
        ("{name} has an approved budget of {v} for this year.", "{first} can spend up to {v} with us in this cycle.",
         "Money available at {company} for our products: {v}."),
        "{name} now has an approved budget of {v} for this year.",
        "{name} has an approved budget of {v} for this year!",
        {"lexical": "What approved budget does {name} have this year?",
         "semantic": "How much money can {name} spend with us?",
         "mixed": "{name} budget limit?"},
    ),
    Attribute(
        "warehouse", "deliveries", "fact",
        ("Rotterdam", "Hamburg", "Lyon", "Milan", "Warsaw"),
        ("{name}'s deliveries go to the warehouse in {v}.", "Ship {first}'s orders to the {v} site.",
         "{company} receives goods at its depot in {v}."),
        "{name}'s deliveries now go to the warehouse in {v}.",
        "{name}'s deliveries go to the warehouse in {v}",
        {"lexical": "Which warehouse do {name}'s deliveries go to?",
         "semantic": "Where do parcels for {name} end up?",
         "mixed": "Delivery address city for {name}?"},
    ),
    Attribute(
        "language", "language", "preference",
        ("German", "Spanish", "French", "Italian", "Dutch"),
        ("{name} prefers to speak {v} in meetings.", "{first} is more comfortable talking in {v}.",
         "Write to {name} in {v} whenever possible."),
        "{name} now prefers to speak {v} in meetings.",
        "{name} prefers to speak {v} in meetings!",
        {"lexical": "Which language does {name} prefer to speak in meetings?",
         "semantic": "In what tongue should we address {name}?",
         "mixed": "{name} language preference?"},
    ),
    Attribute(
        "renewal", "the renewal", "fact",
        ("January", "March", "June", "September", "November"),
        ("{name}'s contract renewal is due in {v}.", "{company} renews its plan with us every {v}.",
         "{first} decides about extending the agreement in {v}."),
        "{name}'s contract renewal is now due in {v}.",
        "{name}'s contract renewal is due in {v}!",
        {"lexical": "When is {name}'s contract renewal due?",
         "semantic": "In which month does {name}'s agreement come up for extension?",
         "mixed": "{name} renewal month?"},
    ),
    Attribute(
        "competitor", "other vendors", "observation",
        ("Globex", "Initech", "Hooli", "Umbrella Corp", "Soylent"),
        ("{name} compares our prices with {v}.", "{first} is also talking to {v} about the same order.",
         "{company} got a rival offer from {v}."),
        "{name} now compares our prices with {v}.",
        "{name} compares our prices with {v}!",
        {"lexical": "Which company does {name} compare our prices with?",
         "semantic": "Who else is {name} considering buying from?",
         "mixed": "Competitor {name} mentioned?"},
    ),
    Attribute(
        "payment", "payment terms", "fact",
        ("30-day", "60-day", "45-day", "upfront", "quarterly"),
        ("{name} pays invoices on {v} terms.", "{first} needs {v} payment terms on every invoice.",
         "Bills for {company} are settled {v}."),
        "{name} now pays invoices on {v} terms.",
        "{name} pays invoices on {v} terms!",
        {"lexical": "On what terms does {name} pay invoices?",
         "semantic": "How long does it take {name} to settle a bill?",
         "mixed": "{name} payment terms?"},
    ),
    Attribute(
        "hobby", "weekends", "observation",
        ("marathon running", "sailing", "chess", "gardening", "jazz piano"),
        ("{name} spends weekends on {v}.", "{first} mentioned being really into {v}.",
         "Small talk with {name}: ask about {v}."),
        "{name} now spends weekends on {v}.",
        "{name} spends weekends on {v}!",
        {"lexical": "What does {name} spend weekends on?",
         "semantic": "What does {name} enjoy doing outside of work?",
         "mixed": "Hobby of {name}?"},
    ),
]  # fmt: skip

TOPICS = [
    ("Late delivery of order #{n}", "the late delivery of order #{n}"),
    ("Quote for {n} ceramic mugs", "a quote for {n} ceramic mugs"),
    ("Invoice question", "a question about the last invoice"),
    ("Onboarding call", "the onboarding of their new team"),
    ("Damaged shipment", "a damaged shipment of {n} units"),
    ("Upgrade to enterprise", "upgrading to the enterprise plan"),
    ("Refund request", "a refund for order #{n}"),
    ("Quarterly review", "the quarterly business review"),
    ("SSO set-up", "setting up single sign-on"),
    ("Product samples", "samples of the new blue lids"),
]
FILLER = [
    "Thanks for getting back to me so quickly.", "The team went through everything on Tuesday.",
    "Please confirm the timeline before the end of the month.", "We are still evaluating the options internally.",
    "Let me know if anything is unclear.", "I am copying my colleague who handles procurement.",
    "Happy to share our usage numbers if that helps.", "We would like a short call this week.",
]  # fmt: skip
GENERAL = [
    ("fact", "Refunds above 500 euros need a manager's approval."),
    ("fact", "Orders placed before noon ship the same day from the Rotterdam hub."),
    ("decision", "We stopped offering free shipping on orders under 50 units."),
    ("decision", "Enterprise quotes always include a two-hour onboarding workshop."),
    ("pattern", "Customers in logistics tend to churn after two late deliveries in a row."),
    ("pattern", "Renewals are decided by the finance team, not by our day-to-day contact."),
    ("goal", "Reach 95 % first-contact resolution on support tickets this quarter."),
    ("goal", "Move every customer with more than 100 seats to annual billing."),
    ("fact", "The blue lids are out of stock until the next production run."),
    ("fact", "Invoices can be issued in euros, dollars or pounds."),
    ("decision", "Jasper owns all renewals above 20,000 euros."),
    ("observation", "Support volume doubles in the week after a release."),
    ("fact", "Our phone line is staffed from 8 am to 6 pm on weekdays."),
    ("fact", "WhatsApp support is only available for enterprise customers."),
    ("decision", "Price increases are announced 60 days before they apply."),
    ("observation", "Customers who join the webinar renew more often."),
    ("fact", "The Hamburg warehouse closes for inventory in the last week of December."),
    ("pattern", "Procurement teams ask for a second quote before signing anything above 10,000 euros."),
    ("fact", "Samples are free for orders of more than 1,000 units."),
    ("decision", "Payment terms longer than 45 days need approval from finance."),
]


@dataclass
class SlotNode:
    """A memory node stating a slot's value, with its validity as the eval knows it."""

    id: str
    value: str
    valid_from: datetime
    valid_to: datetime | None = None


@dataclass
class Slot:
    """One attribute of one contact over time."""

    contact: int
    attribute: Attribute
    plan: str  # once | restated | near_duplicate | key_change | supersede_change
    nodes: list[SlotNode] = field(default_factory=list)
    current: str = ""
    history: list[tuple[str, datetime]] = field(default_factory=list)  # (value, since)


@dataclass
class Session:
    """One interaction of a conversation."""

    contact: int
    agent: str
    at: datetime
    topic: str
    subject: str
    thread: str
    mentions: list[str] = field(default_factory=list)


def fill(template: str, contact: tuple[str, str], value: str = "") -> str:
    """A template with the contact's name, first name, company and a value."""
    name, company = contact
    return template.format(name=name, first=name.split()[0], company=company, v=value)


# --- API -----------------------------------------------------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def api_client(dsn: str, transport: str) -> Iterator[httpx.Client]:
    """An HTTP client of the API on `dsn`: the ASGI app in this process, or `cortex serve`."""
    os.environ["DATABASE_URL"] = dsn
    os.environ.pop("ANTHROPIC_API_KEY", None)
    get_settings.cache_clear()
    if transport == "inprocess":
        from functions_framework.aio import create_asgi_app
        from starlette.testclient import TestClient

        app = create_asgi_app(target="api", source=str(ROOT / "functions" / "main.py"))
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client
            client.portal.call(db.aclose_pool)  # type: ignore[union-attr]
        return
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "functions")}
    command = [str(ROOT / ".venv" / "bin" / "cortex"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    log = ROOT / "bench-results" / "eval-api.log"
    with (
        http_server(command, env, f"http://127.0.0.1:{port}", log, timeout=180) as base,
        httpx.Client(base_url=base, timeout=120) as client,
    ):
        yield client


class Api:
    """The public API as the agents use it (a key per agent)."""

    def __init__(self, client: httpx.Client, keys: dict[str, str]) -> None:
        self.client = client
        self.keys = keys
        self.calls = 0

    def request(self, agent: str, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        """One call; anything but an expected status stops the eval with the answer."""
        self.calls += 1
        r = self.client.request(
            method, "/api/v1" + path, json=body, headers={"Authorization": f"Bearer {self.keys[agent]}"}
        )
        if r.status_code not in ok:
            raise RuntimeError(f"{method} {path} -> {r.status_code}: {r.text[:500]}")
        return r.json()


# --- generation ------------------------------------------------------------------------------------


def setup_tenant(dsn: str) -> dict[str, str]:
    """The tenant and its agents' keys (operator set-up, not data)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select cortex.create_tenant('Eval Traders', 'eval', 'UTC')").fetchone()
        assert row is not None
        tid = row[0]
        keys = {}
        for agent in AGENTS:
            conn.execute("select cortex.create_agent(%s, %s)", (tid, agent))
            k = conn.execute("select cortex.create_agent_key(%s, %s, 'eval')", (tid, agent)).fetchone()
            assert k is not None
            keys[agent] = str(k[0])
    return keys


SIZES = {"normal": (20, 150, 7), "tiny": (6, 14, 3)}  # contacts, conversations, attributes per contact


def plan_world(rng: random.Random, now: datetime, size: str) -> tuple[list[Session], list[Slot]]:
    """Conversations (sessions) and fact slots with their life plans, all dated."""
    n_contacts, n_conversations, n_attributes = SIZES[size]
    start = now - timedelta(days=DAYS)
    sessions: list[Session] = []
    for conv in range(n_conversations):
        contact = conv % n_contacts if conv < 2 * n_contacts else rng.randrange(n_contacts)
        agent = rng.choice(AGENTS)
        subject_t, topic_t = rng.choice(TOPICS)
        n = rng.randint(10, 9999)
        at = start + timedelta(days=rng.uniform(0, DAYS - 20))
        for _ in range(rng.choice((1, 2, 2, 3, 3, 4))):
            sessions.append(Session(contact, agent, at, topic_t.format(n=n), subject_t.format(n=n), f"conv-{conv}", []))
            at += timedelta(days=rng.uniform(0.5, 12), hours=rng.uniform(0, 8))
            at = min(at, now - timedelta(hours=1))
    sessions.sort(key=lambda s: s.at)
    plans = ["once"] * 9 + ["restated"] * 5 + ["near_duplicate"] * 2 + ["key_change"] * 5 + ["supersede_change"] * 4
    slots = []
    for c in range(n_contacts):
        for attribute in rng.sample(ATTRIBUTES, n_attributes):
            slots.append(Slot(c, attribute, rng.choice(plans)))
    return sessions, slots


def generate(api: Api, rng: random.Random, now: datetime, size: str) -> tuple[list[Slot], dict[str, int]]:
    """Feeds the world through the API in time order; returns the slots with their nodes."""
    contact_ids: list[str] = []
    for i, (name, company) in enumerate(CONTACTS[: SIZES[size][0]]):
        first, last = name.lower().split()
        domain = company.lower().replace(" ", "") + ".example.com"
        out = api.request(
            AGENTS[i % len(AGENTS)], "POST", "/contacts",
            {"email": f"{first}.{last}@{domain}", "name": name, "company_name": company, "stage": "customer"},
        )  # fmt: skip
        contact_ids.append(str(out["id"]))

    sessions, slots = plan_world(rng, now, size)
    by_contact: dict[int, list[Session]] = {}
    for s in sessions:
        by_contact.setdefault(s.contact, []).append(s)

    # Each slot's events, tied to sessions of its contact: stated early, changed or restated later.
    events: list[tuple[datetime, int, str, Slot, Session, str]] = []  # (time, order, action, slot, session, value)
    for slot in slots:
        mine = by_contact[slot.contact]
        first_i = rng.randrange(max(1, len(mine) * 6 // 10))
        values = list(slot.attribute.values)
        rng.shuffle(values)
        events.append((mine[first_i].at, len(events), "state", slot, mine[first_i], values[0]))
        later = mine[first_i + 1 :]
        if slot.plan in ("key_change", "supersede_change") and later:
            s2 = rng.choice(later)
            events.append((s2.at, len(events), slot.plan, slot, s2, values[1]))
            after = [s for s in later if s.at > s2.at]
            if after and rng.random() < 0.4:
                s3 = rng.choice(after)
                events.append((s3.at, len(events), "restate", slot, s3, values[1]))
        elif slot.plan == "restated" and later:
            s2 = rng.choice(later)
            events.append((s2.at, len(events), "restate", slot, s2, values[0]))
        elif slot.plan == "near_duplicate" and later:
            s2 = rng.choice(later)
            events.append((s2.at, len(events), "near_duplicate", slot, s2, values[0]))
    events.sort(key=lambda e: (e[0], e[1]))

    # The conversations mention what is said in them.
    for _, _, action, slot, session, value in events:
        first = CONTACTS[slot.contact][0].split()[0]
        verb = "changed" if action.endswith("change") else "brought up"
        session.mentions.append(f"{first} {verb} {slot.attribute.label}: {value}.")
    items = []
    for i, s in enumerate(sessions):
        name, company = CONTACTS[s.contact]
        text = " ".join(
            [f"Talked with {name} ({company}) about {s.topic}.", *rng.sample(FILLER, 2), *s.mentions,
             rng.choice(FILLER)]
        )  # fmt: skip
        items.append(
            {
                "contact_id": contact_ids[s.contact],
                "type": rng.choice(["call", "email_received", "email_sent", "note"]),
                "occurred_at": s.at.isoformat(),
                "external_id": f"eval-{i}",
                "agent": s.agent,
                "subject": s.subject,
                "raw_content": text,
                "summary": text[:400],
                "thread_id": s.thread,
            }
        )
    # Each agent imports its own conversations (an import logs as the calling agent).
    for agent in AGENTS:
        mine = [item for item in items if item["agent"] == agent]
        imported = api.request(agent, "POST", "/interactions/import", mine) if mine else {"inserted": 0}
        if imported["inserted"] != len(mine):
            raise RuntimeError(f"interactions import: {str(imported)[:1000]}")

    counts = {"contacts": len(contact_ids), "sessions": len(sessions), "remember": 0, "supersede": 0,
              "deduplicated": 0, "general": 0}  # fmt: skip
    # General memories, spread over the months.
    for kind, text in GENERAL:
        at = now - timedelta(days=rng.uniform(1, DAYS))
        api.request(
            rng.choice(AGENTS), "POST", "/memories", {"kind": kind, "title": text, "valid_from": at.isoformat()}
        )
        counts["general"] += 1

    for at, _, action, slot, session, value in events:
        contact = CONTACTS[slot.contact]
        a = slot.attribute
        key = f"contact:{contact_ids[slot.contact]}:{a.name}"
        body_text = f"Said during a conversation about {session.topic} ({session.agent}, {at:%d %B %Y})."
        base = {"kind": a.kind, "contact_id": contact_ids[slot.contact], "valid_from": at.isoformat(),
                "body": body_text, "tags": [a.name]}  # fmt: skip
        if action == "state":
            title = fill(a.statements[0], contact, value)
            payload = {**base, "title": title}
            if slot.plan == "key_change":
                payload["key"] = key
            out = api.request(session.agent, "POST", "/memories", payload)
            counts["remember"] += 1
            slot.nodes.append(SlotNode(str(out["memory"]["id"]), value, at))
            slot.current = value
            slot.history.append((value, at))
        elif action == "restate":
            template = rng.choice(a.statements[1:])
            out = api.request(session.agent, "POST", "/memories", {**base, "title": fill(template, contact, value)})
            counts["remember"] += 1
            node_id = str(out["memory"]["id"])
            if out.get("deduplicated"):
                counts["deduplicated"] += 1
            if all(n.id != node_id for n in slot.nodes):
                slot.nodes.append(SlotNode(node_id, value, at))
        elif action == "near_duplicate":
            out = api.request(
                session.agent, "POST", "/memories", {**base, "title": fill(a.near_duplicate, contact, value)}
            )
            counts["remember"] += 1
            node_id = str(out["memory"]["id"])
            if out.get("deduplicated"):
                counts["deduplicated"] += 1
            if all(n.id != node_id for n in slot.nodes):
                slot.nodes.append(SlotNode(node_id, value, at))
        elif action == "key_change":
            out = api.request(
                session.agent, "POST", "/memories", {**base, "key": key, "title": fill(a.change, contact, value)}
            )
            counts["remember"] += 1
            for n in slot.nodes:
                if n.valid_to is None and n.value != value:
                    n.valid_to = at
            slot.nodes.append(SlotNode(str(out["memory"]["id"]), value, at))
            slot.current = value
            slot.history.append((value, at))
        elif action == "supersede_change":
            old = next(n for n in slot.nodes if n.valid_to is None)
            out = api.request(
                session.agent, "POST", f"/memories/{old.id}/supersede",
                {"title": fill(a.change, contact, value), "body": body_text, "valid_from": at.isoformat()},
            )  # fmt: skip
            counts["supersede"] += 1
            for n in slot.nodes:
                if n.valid_to is None:
                    n.valid_to = at
            slot.nodes.append(SlotNode(str(out["memory"]["id"]), value, at))
            slot.current = value
            slot.history.append((value, at))
    return slots, counts


# --- questions -------------------------------------------------------------------------------------


@dataclass
class Question:
    """A question, its style, its right answers and (for "as of") the time it is asked about."""

    text: str
    style: str
    answers: set[str]
    wrong: set[str]  # superseded nodes of the slot: should not be served for a current question
    as_of: datetime | None = None
    slot: Slot | None = None
    vector: list[float] | None = None  # the query's embedding, computed once (embed_questions)


def questions(slots: list[Slot], rng: random.Random) -> tuple[list[Question], list[Question]]:
    """One question per style for each slot (current value), and "as of" questions for slots that changed."""
    current: list[Question] = []
    as_of: list[Question] = []
    for slot in slots:
        contact = CONTACTS[slot.contact]
        answers = {n.id for n in slot.nodes if n.valid_to is None and n.value == slot.current}
        wrong = {n.id for n in slot.nodes if n.value != slot.current}
        for style in STYLES:
            current.append(Question(fill(slot.attribute.questions[style], contact), style, answers, wrong, slot=slot))
        if len(slot.history) > 1:
            (old_value, since), (_, until) = slot.history[0], slot.history[1]
            at = since + (until - since) * rng.uniform(0.3, 0.7)
            old = {n.id for n in slot.nodes if n.value == old_value and n.valid_from <= at}
            later = {n.id for n in slot.nodes if n.valid_from > at}
            text = fill(slot.attribute.questions["lexical"], contact)
            as_of.append(Question(text, "as_of", old, later, at))
    return current, as_of


def embed_questions(qs: list[Question]) -> None:
    """Embeds every question once with the local model (what the API does for each request), so
    the three ways of asking and the tuning rounds send the same query_vector with the text."""
    from cortex import embeddings

    texts = sorted({q.text for q in qs})
    vectors = dict(zip(texts, embeddings.embed_texts(texts), strict=True))
    for q in qs:
        q.vector = vectors[q.text]


def ask(api: Api, q: Question, mode: str) -> tuple[list[str], float]:
    """The ids a search returns for the question in `mode` (only those its ranking found), and the time."""
    # The eval only looks: no access recorded, so no question reinforces what a later one finds.
    body: dict[str, Any] = {"query": q.text, "limit": 20, "record_access": False}
    if q.vector is not None:
        body["query_vector"] = q.vector
    weights = MODES[mode]
    if weights is not None:
        body["weights"] = weights
    if q.as_of is not None:
        body["as_of"] = q.as_of.isoformat()
    t0 = time.perf_counter()
    out = api.request("luna", "POST", "/memories/search", body, ok=(200,))
    seconds = time.perf_counter() - t0
    ids = []
    for r in out["results"]:
        rankings = r.get("rankings") or {}
        if mode in ("text", "vector") and rankings.get(mode) is None:
            continue
        ids.append(str(r["memory"]["id"]))
    return ids, seconds


def score(results: list[tuple[Question, list[str]]]) -> dict[str, Any]:
    """recall@k, MRR and the superseded leak of a list of (question, ranked ids)."""
    n = len(results)
    out: dict[str, Any] = {"n": n}
    if n == 0:
        return out
    for k in KS:
        out[f"recall@{k}"] = round(sum(any(i in q.answers for i in ids[:k]) for q, ids in results) / n, 3)
    rr = []
    for q, ids in results:
        rank = next((r for r, i in enumerate(ids[:20], 1) if i in q.answers), None)
        rr.append(1 / rank if rank else 0.0)
    out["mrr"] = round(sum(rr) / n, 3)
    out["top1"] = round(sum(bool(ids) and ids[0] in q.answers for q, ids in results) / n, 3)
    out["superseded_in_top5"] = sum(any(i in q.wrong for i in ids[:5]) for q, ids in results)
    return out


def look_alike(a: int, b: int) -> bool:
    """Two contacts whose names share a word or differ in a letter or two (Lopez / Lopes)."""
    wa, wb = CONTACTS[a][0].lower().split(), CONTACTS[b][0].lower().split()
    close = sum(x != y for x, y in zip(wa[-1], wb[-1], strict=False)) + abs(len(wa[-1]) - len(wb[-1])) <= 2
    return bool(set(wa) & set(wb)) or close or sorted(wa) == sorted(wb)


def misses(answered: list[tuple[Question, list[str]]], slots: list[Slot]) -> dict[str, int]:
    """What stood first when the first result was wrong: another fact of the same contact, a
    look-alike contact's fact, another contact's fact, an event or general memory, or nothing."""
    owner = {n.id: s for s in slots for n in s.nodes}
    out: dict[str, int] = {}
    for q, ids in answered:
        if ids and ids[0] in q.answers:
            continue
        top = owner.get(ids[0]) if ids else None
        if not ids:
            why = "no result"
        elif top is None:
            why = "an event or general memory"
        elif q.slot is not None and top.contact == q.slot.contact:
            why = "same contact, other fact" if top is not q.slot else "same slot, other value"
        elif q.slot is not None and look_alike(top.contact, q.slot.contact):
            why = "look-alike contact's fact"
        else:
            why = "other contact's fact"
        out[why] = out.get(why, 0) + 1
    return out


def evaluate(
    api: Api, current: list[Question], as_of: list[Question], slots: list[Slot] | None = None
) -> dict[str, Any]:
    """Asks every question in every mode; the scores per mode and style, overall, and as of."""
    report: dict[str, Any] = {}
    latency: dict[str, list[float]] = {}
    for mode in MODES:
        answered = []
        for q in current:
            ids, seconds = ask(api, q, mode)
            latency.setdefault(mode, []).append(seconds)
            answered.append((q, ids))
        per_style = {style: score([(q, ids) for q, ids in answered if q.style == style]) for style in STYLES}
        timed = []
        for q in as_of:
            ids, seconds = ask(api, q, mode)
            timed.append((q, ids))
        report[mode] = {"overall": score(answered), **per_style, "as_of": score(timed)}
        if slots is not None:
            report[mode]["first_wrong"] = misses(answered, slots)
        print(
            f"  {mode:6s} recall@5 {report[mode]['overall'].get('recall@5')} recall@10 "
            f"{report[mode]['overall'].get('recall@10')} MRR {report[mode]['overall'].get('mrr')} "
            f"as-of top-1 {report[mode]['as_of'].get('top1')}",
            flush=True,
        )
    report["search_ms_p50"] = {
        m: round(sorted(v)[len(v) // 2] * 1000, 1) for m, v in latency.items() if v
    }  # fmt: skip
    return report


TUNING = [(k, wt) for k in (5, 10, 20, 60) for wt in (0.5, 1.0, 2.0)]


def tune(
    api: Api, dsn: str, current: list[Question], as_of: list[Question], grid: list[tuple[int, float]] | None = None
) -> list[dict[str, Any]]:
    """Hybrid search under other fusion settings (rrf_k x weight_text, weight_vector 1), set in the
    eval tenant's memory_settings row one after the other; the defaults are put back after."""
    rows = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        saved = conn.execute("select rrf_k, weight_text, weight_vector from cortex.memory_settings").fetchone()
        assert saved is not None
        try:
            for k, wt in grid or TUNING:
                conn.execute(
                    "update cortex.memory_settings set rrf_k = %s, weight_text = %s, weight_vector = 1", (k, wt)
                )
                answered = [(q, ask(api, q, "hybrid")[0]) for q in current]
                timed = [(q, ask(api, q, "hybrid")[0]) for q in as_of]
                overall, at = score(answered), score(timed)
                rows.append({"rrf_k": k, "weight_text": wt, **{m: overall[m] for m in ("recall@5", "recall@10", "mrr")},
                             "as_of_top1": at.get("top1")})  # fmt: skip
                print(f"  tune rrf_k={k} weight_text={wt}: {rows[-1]}", flush=True)
        finally:
            conn.execute("update cortex.memory_settings set rrf_k = %s, weight_text = %s, weight_vector = %s", saved)
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The tables for docs/benchmarks.md."""
    lines = [
        "| search | style | n | recall@5 | recall@10 | recall@20 | MRR |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in MODES:
        for style in ("overall", *STYLES):
            s = result["scores"][mode][style]
            label = f"**{style}**" if style == "overall" else style
            lines.append(
                f"| {mode} | {label} | {s['n']} | {s['recall@5']} | {s['recall@10']} | {s['recall@20']} | {s['mrr']} |"
            )
    lines += ["", "| search | as-of questions | top-1 accuracy | recall@5 | MRR |", "|---|---|---|---|---|"]
    for mode in MODES:
        s = result["scores"][mode]["as_of"]
        lines.append(f"| {mode} | {s['n']} | {s.get('top1')} | {s.get('recall@5')} | {s.get('mrr')} |")
    return "\n".join(lines)


def run(
    seed: int,
    transport: str,
    keep: bool,
    size: str = "normal",
    tuning: bool = False,
    patch: Path | None = None,
    grid: list[tuple[int, float]] | None = None,
) -> dict[str, Any]:
    """Builds the data set, indexes it, asks every question; the whole report."""
    rng = random.Random(seed)
    dsn = with_database(base_dsn(), f"cortex_eval_{seed}")
    started = time.perf_counter()
    recreate_database(dsn, "cortex_eval")
    keys = setup_tenant(dsn)
    now = datetime.now(UTC).replace(microsecond=0)
    with api_client(dsn, transport) as client:
        api = Api(client, keys)
        print(f"generating the data set (seed {seed}) through the API ({transport})", flush=True)
        slots, counts = generate(api, rng, now, size)
        generated_s = time.perf_counter() - started
        print(f"  {counts}; {api.calls} calls in {generated_s:.0f} s", flush=True)
        print("running the worker's indexing until nothing is pending", flush=True)
        indexing = index_all(dsn, worker_id="eval", max_seconds=1800)
        print(f"  {indexing}", flush=True)
        if indexing["still_pending"]:
            raise RuntimeError(f"nodes still pending after indexing: {indexing}")
        if patch is not None:
            # An experiment: a changed search function, say, tried on this throwaway database only.
            print(f"applying {patch} to {dsn.rsplit('/', 1)[-1]}", flush=True)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(patch.read_text().encode())
        current, as_of = questions(slots, rng)
        embed_questions(current + as_of)
        print(f"asking {len(current)} questions and {len(as_of)} as-of questions, 3 ways", flush=True)
        scores = evaluate(api, current, as_of, slots)
        tuned = tune(api, dsn, current, as_of, grid) if tuning else None
    with psycopg.connect(dsn, autocommit=True) as conn:
        nodes = dict(conn.execute("select kind, count(*)::int from cortex.memory_nodes group by 1 order by 2 desc"))
        statuses = dict(conn.execute("select status, count(*)::int from cortex.memory_nodes group by 1"))
        edges = dict(conn.execute("select relation, count(*)::int from cortex.memory_edges group by 1 order by 2 desc"))
        settings = conn.execute(
            "select rrf_k, weight_text, weight_vector, weight_graph from cortex.memory_settings limit 1"
        ).fetchone()
        machine = machine_info(conn)
    if not keep:
        with psycopg.connect(with_database(dsn, "postgres"), autocommit=True) as admin:
            admin.execute(f'drop database if exists "cortex_eval_{seed}" with (force)')
    best_single = max(scores["text"]["overall"]["mrr"], scores["vector"]["overall"]["mrr"])
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seed": seed,
        "size": size,
        "transport": transport,
        "machine": machine,
        "dataset": {
            **counts,
            "nodes_by_kind": nodes,
            "nodes_by_status": statuses,
            "edges_by_relation": edges,
            "slots": len(slots),
            "questions": len(current),
            "as_of_questions": len(as_of),
        },
        "settings": dict(zip(("rrf_k", "weight_text", "weight_vector", "weight_graph"), settings or (), strict=False)),
        "indexing": indexing,
        "scores": scores,
        "tuning": tuned,
        "patch": str(patch) if patch else None,
        "hybrid_beats_best_single": {
            "mrr": scores["hybrid"]["overall"]["mrr"] > best_single,
            **{
                f"recall@{k}": scores["hybrid"]["overall"][f"recall@{k}"]
                > max(scores["text"]["overall"][f"recall@{k}"], scores["vector"]["overall"][f"recall@{k}"])
                for k in KS
            },
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=13, help="the data set's seed (default 13)")
    parser.add_argument("--json", dest="json_path", help="also write the report as JSON to this file ('-': stdout)")
    parser.add_argument("--transport", choices=("inprocess", "serve"), default="inprocess")
    parser.add_argument("--size", choices=tuple(SIZES), default="normal", help="tiny: a smoke run (tests)")
    parser.add_argument("--patch", type=Path, help="SQL run on the eval database before the questions (experiments)")
    parser.add_argument("--tune", action="store_true", help="also try other rrf_k / weight_text for hybrid")
    parser.add_argument(
        "--grid",
        help="with --tune: the settings to try, K:WEIGHT_TEXT pairs separated by commas (default: rrf_k 5, 10, 20, 60 "
        "by weight_text 0.5, 1, 2)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the database cortex_eval_<seed> afterwards")
    args = parser.parse_args(argv)
    # The worker's warnings and errors (a failed sweep) show up in the eval's output.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    grid = [(int(k), float(w)) for k, w in (p.split(":") for p in args.grid.split(","))] if args.grid else None
    result = run(args.seed, args.transport, args.keep, args.size, args.tune or grid is not None, args.patch, grid)
    if args.json_path == "-":
        print(json.dumps(result, indent=2, default=str))
    elif args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print()
    print(markdown(result))
    print(f"\nhybrid beats the best single ranking: {result['hybrid_beats_best_single']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
