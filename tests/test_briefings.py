"""Briefings (issue 8, seed 001): the seven sections from the graph, limits, the character budget,
the cache on the graph version, access tracking, the two renderers, pre-computation, seed 000's
attention items, both call paths, bad input, tenant and agent isolation. Seed 001's testing
strategy, one test each (12 unit, 6 integration), then the rest."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from cortex.briefings.jobs import render_briefing
from cortex.db import call, typed
from cortex.errors import CortexError
from tests.conftest import AsAgent, Tenant

Admin = psycopg.Connection[dict[str, Any]]
BULLET = re.compile(
    r"^- \*\*.+\*\* \((fact|decision|event|preference|pattern|goal|observation|agent|contact|person|system)\)(: .+)?$"
)
SECTIONS = [
    "Identity",
    "Active Context",
    "Key Relationships",
    "Patterns & Lessons",
    "Goals",
    "Unresolved",
    "Recent Events",
]


# --- helpers -------------------------------------------------------------------------------------


def node(admin: Admin, tenant: Tenant, kind: str, title: str, body: str = "", **fields: Any) -> str:
    """A node written as the owner (the graph's own rules: RLS is the API's business)."""
    cols = {"tenant_id": tenant.id, "kind": kind, "title": title, "body": body, "source_agent": "luna", **fields}
    names = ", ".join(cols)
    marks = ", ".join(f"%({k})s" for k in cols)
    row = admin.execute(f"insert into cortex.memory_nodes ({names}) values ({marks}) returning id", cols).fetchone()
    assert row is not None
    return str(row["id"])


def edge(
    admin: Admin, tenant: Tenant, source: str, target: str, relation: str, weight: float = 0.8, **fields: Any
) -> None:
    """An edge written as the owner; `last_reinforced_at` (an interval ago) makes it decayed."""
    age = fields.pop("age", None)
    admin.execute(
        "insert into cortex.memory_edges (tenant_id, source_id, target_id, relation, weight, last_reinforced_at)"
        " values (%s, %s, %s, %s, %s, now() - coalesce(%s::interval, '0'))",
        (tenant.id, source, target, relation, weight, age),
    )


def agent_node(admin: Admin, tenant: Tenant, agent: str = "luna") -> str:
    row = admin.execute(
        "select id::text from cortex.memory_nodes where tenant_id = %s and ref_kind = 'agent' and ref_id = %s",
        (tenant.id, agent),
    ).fetchone()
    assert row is not None
    return str(row["id"])


def brief(as_agent: AsAgent, tenant: Tenant, caller: str = "luna", **args: Any) -> dict[str, Any]:
    """public.get_briefing through the PostgREST path, as `caller`."""
    with as_agent(tenant, caller) as conn:
        result: dict[str, Any] = call(conn, "get_briefing", **args)
    return result


def section(result: dict[str, Any], title: str) -> list[dict[str, Any]]:
    found = [s["items"] for s in result["sections"] if s["title"] == title]
    assert found, f"no section {title}"
    items: list[dict[str, Any]] = found[0]
    return items


def titles(result: dict[str, Any], title: str) -> list[str]:
    return [i["title"] for i in section(result, title)]


def all_ids(result: dict[str, Any]) -> list[str]:
    return [i["id"] for s in result["sections"] for i in s["items"]]


def settings(admin: Admin, tenant: Tenant, agent: str | None = None, **values: Any) -> dict[str, Any]:
    row = admin.execute(
        "select cortex.set_briefing_settings(%s, %s, %s) as r", (tenant.id, agent, Jsonb(values))
    ).fetchone()
    assert row is not None
    result: dict[str, Any] = row["r"]
    return result


@pytest.fixture
def world(admin: Admin, tenant: Tenant) -> Iterator[dict[str, str]]:
    """Luna's corner of the graph: one node (or more) for every section."""
    me = agent_node(admin, tenant)
    ids: dict[str, str] = {"me": me}
    ids["pref"] = node(admin, tenant, "preference", "Luna answers in plain language", "No jargon with customers.")
    edge(admin, tenant, ids["pref"], me, "applies_to", 0.9)
    ids["capability"] = node(admin, tenant, "fact", "Luna can issue refunds up to 200 EUR", "Above that, Mia decides.")
    edge(admin, tenant, ids["capability"], me, "applies_to", 0.9)
    ids["observation_on_me"] = node(admin, tenant, "observation", "Luna replied within an hour all week")
    edge(admin, tenant, ids["observation_on_me"], me, "applies_to", 0.9)
    # Recent work (anchors) and what it touches.
    ids["decision"] = node(admin, tenant, "decision", "Refund policy for damaged lids", "Refund in full, no return.")
    ids["linked_fact"] = node(admin, tenant, "fact", "Warehouse ships replacements from Rotterdam", source_agent="mia",
                              created_at="2026-01-01")  # fmt: skip
    edge(admin, tenant, ids["decision"], ids["linked_fact"], "relates_to", 0.8)
    ids["supplier"] = node(admin, tenant, "system", "Lid supplier portal", "Where damaged batches are reported.",
                           source_agent=None)  # fmt: skip
    edge(admin, tenant, ids["decision"], ids["supplier"], "mentions", 0.8)
    # Patterns that apply to Luna, directly and through a fact about her; with evidence.
    ids["pattern"] = node(admin, tenant, "pattern", "Damage complaints spike after heat waves", importance=0.8)
    edge(admin, tenant, ids["pattern"], me, "applies_to", 0.9)
    ids["evidence"] = node(admin, tenant, "observation", "Three cracked-lid tickets in the July heat")
    edge(admin, tenant, ids["evidence"], ids["pattern"], "instance_of", 0.9)
    ids["pattern2"] = node(admin, tenant, "pattern", "Refund questions come on Mondays", importance=0.6)
    edge(admin, tenant, ids["pattern2"], ids["capability"], "applies_to", 0.9)
    ids["pattern_mia"] = node(admin, tenant, "pattern", "Upsells work best in spring", source_agent="mia")
    edge(admin, tenant, ids["pattern_mia"], agent_node(admin, tenant, "mia"), "applies_to", 0.9)
    # A goal near Luna's work.
    ids["goal"] = node(admin, tenant, "goal", "Resolve damage tickets within a day", source_agent="mia", importance=0.9)
    edge(admin, tenant, ids["goal"], ids["decision"], "applies_to", 0.8)
    # Unresolved: a contradiction, a low-confidence fact, a review flag.
    ids["claim"] = node(admin, tenant, "fact", "Lids are covered by the supplier warranty", source_agent="mia")
    ids["counter"] = node(admin, tenant, "fact", "The supplier warranty excludes lids", source_agent="mia")
    edge(admin, tenant, ids["claim"], ids["linked_fact"], "relates_to", 0.7)
    edge(admin, tenant, ids["claim"], ids["counter"], "contradicts", 0.8)
    # (Mia's, near Luna's work: Luna's own recent facts would show first in Active Context.)
    ids["unsure"] = node(admin, tenant, "fact", "Heat may warp the new lids", confidence=0.3, source_agent="mia")
    ids["review"] = node(admin, tenant, "fact", "Refund cap may change in Q3", needs_review=True,
                         review_reason="two sources disagree", source_agent="mia")  # fmt: skip
    edge(admin, tenant, ids["unsure"], ids["decision"], "relates_to", 0.6)
    edge(admin, tenant, ids["review"], ids["capability"], "relates_to", 0.6)
    # A recent event of Luna's.
    ids["event"] = node(admin, tenant, "event", "Called the lid supplier about batch 42")
    yield ids


# --- unit (seed 001) -------------------------------------------------------------------------------


def test_identity_includes_the_agents_preferences_and_capabilities(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant
) -> None:
    result = brief(as_agent, tenant)
    identity = section(result, "Identity")
    assert identity[0]["id"] == world["me"] and identity[0]["kind"] == "agent"
    ids = [i["id"] for i in identity]
    assert world["pref"] in ids and world["capability"] in ids
    # Only preferences and facts: an observation that applies_to Luna is not identity.
    assert world["observation_on_me"] not in ids
    assert "- **Luna can issue refunds up to 200 EUR** (fact): Above that, Mia decides.\n" in result["text"]


def test_active_context_uses_hybrid_search_anchored_on_recent_work(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    # Reached by text only (shares the anchor's words, no edge), and by graph only (no shared word).
    by_text = node(admin, tenant, "fact", "Damaged lids are photographed before a refund", source_agent="mia")
    result = brief(as_agent, tenant)
    active = [i["id"] for i in section(result, "Active Context")]
    assert world["decision"] in active  # the anchor itself (its own words)
    assert world["linked_fact"] in active  # graph: one edge from the anchor
    assert by_text in active  # text: "damaged", "lids", "refund"
    # The same ranking search_memories gives for the same anchors and query.
    with as_agent(tenant, "luna") as conn:
        search = call(conn, "search_memories", query="refund or policy or damaged or lids",
                      anchors=[world["decision"], world["event"]], anchor_depth=3,
                      kinds=["decision", "fact", "event"])  # fmt: skip
    found = {r["memory"]["id"]: r["rankings"] for r in search["results"]}
    assert found[world["linked_fact"]]["graph"] is not None and found[world["linked_fact"]]["text"] is None
    assert found[by_text]["text"] is not None and found[by_text]["graph"] is None


def test_patterns_traverse_applies_to_with_evidence(world: dict[str, str], as_agent: AsAgent, tenant: Tenant) -> None:
    result = brief(as_agent, tenant)
    patterns = section(result, "Patterns & Lessons")
    ids = [p["id"] for p in patterns]
    assert ids[:2] == [world["pattern"], world["pattern2"]]  # direct first (importance x weight), then depth 2
    assert world["pattern_mia"] not in ids
    assert patterns[0]["evidence"] == [
        {"id": world["evidence"], "title": "Three cracked-lid tickets in the July heat", "kind": "observation"}
    ]
    assert "  - evidence: Three cracked-lid tickets in the July heat (observation)\n" in result["text"]


def test_unresolved_surfaces_contradictions_with_both_sides(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant
) -> None:
    result = brief(as_agent, tenant)
    unresolved = section(result, "Unresolved")
    pair = [u for u in unresolved if u.get("contradicts")]
    assert len(pair) == 1
    assert pair[0]["id"] == world["claim"] and pair[0]["contradicts"]["id"] == world["counter"]
    assert (
        "- **Lids are covered by the supplier warranty** (fact): "
        'contradicts "The supplier warranty excludes lids" (fact)' in result["text"]
    )
    ids = [u["id"] for u in unresolved]
    assert world["unsure"] in ids and world["review"] in ids
    review = next(u for u in unresolved if u["id"] == world["review"])
    assert review["body"].startswith("Needs review: two sources disagree")


def test_max_items_per_section_is_enforced(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    me = world["me"]
    for n in range(15):
        pref = node(admin, tenant, "preference", f"Luna preference number {n}", importance=0.5)
        edge(admin, tenant, pref, me, "applies_to", 0.5)
    assert len(section(brief(as_agent, tenant), "Identity")) == 10
    settings(admin, tenant, "luna", max_items_per_section=3)
    result = brief(as_agent, tenant)
    assert all(len(s["items"]) <= 3 for s in result["sections"])
    assert len(section(result, "Identity")) == 3
    # Another agent keeps the tenant's default.
    assert settings(admin, tenant, None)["effective"]["max_items_per_section"] == 10


def test_max_total_items_is_enforced_from_the_lowest_sections(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    full = brief(as_agent, tenant)
    assert len(all_ids(full)) > 6
    settings(admin, tenant, "luna", max_total_items=6)
    result = brief(as_agent, tenant)
    assert len(all_ids(result)) == 6
    assert all_ids(result) == all_ids(full)[:6]  # the first six in reading order: lower sections lose


def test_max_chars_truncates_whole_bullets_and_says_so(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    long = " ".join(["warehouse"] * 60)
    for n in range(8):
        pref = node(admin, tenant, "preference", f"Luna rule {n}", long)
        edge(admin, tenant, pref, world["me"], "applies_to", 0.6)
    result = brief(as_agent, tenant, max_chars=900)
    text = result["text"]
    assert len(text) <= 900 and result["chars"] == len(text) and result["max_chars"] == 900
    assert text.endswith("_[Briefing truncated — increase max_chars for full context]_\n")
    # Whole bullets only, each body cut at 200 characters on a word boundary.
    bullets = [line for line in text.splitlines() if line.startswith("- ")]
    assert bullets and all(BULLET.match(b) for b in bullets)
    for b in bullets:
        body = b.split("): ", 1)[1] if "): " in b else ""
        assert len(body) <= 200
        if body.endswith("…"):
            assert body[:-1].split(" ")[-1] in ("warehouse", *long.split())
    # The sections in the answer are what the text shows.
    assert sum(len(s["items"]) for s in result["sections"]) == len(bullets)


def test_cache_returns_the_cached_briefing_when_the_graph_is_unchanged(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant
) -> None:
    first = brief(as_agent, tenant)
    second = brief(as_agent, tenant)
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["text"] == first["text"] and second["generated_at"] == first["generated_at"]
    assert second["graph_version"] == first["graph_version"]
    # Per format and budget.
    assert brief(as_agent, tenant, format="compact")["cached"] is False
    assert brief(as_agent, tenant, max_chars=4000)["cached"] is False
    assert brief(as_agent, tenant, format="compact")["cached"] is True


def test_cache_is_invalidated_when_the_graph_version_moves(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant
) -> None:
    first = brief(as_agent, tenant)
    with as_agent(tenant, "luna") as conn:
        call(conn, "remember", kind="decision", title="Offer store credit for late deliveries")
    second = brief(as_agent, tenant)
    assert second["cached"] is False and second["graph_version"] > first["graph_version"]
    assert "Offer store credit for late deliveries" in second["text"]


def test_access_tracking_bumps_every_node_shown_once_per_read(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    result = brief(as_agent, tenant)
    shown = set(all_ids(result)) | {world["evidence"], world["counter"]}
    logged = admin.execute(
        "select node_id::text as id, count(*) as n, min(agent) as agent from cortex.memory_access"
        " where tenant_id = %s group by node_id",
        (tenant.id,),
    ).fetchall()
    assert {r["id"] for r in logged} == shown  # not the search's candidates, only what was served
    assert all(r["n"] == 1 and r["agent"] == "luna" for r in logged)
    assert brief(as_agent, tenant)["cached"] is True  # a cached read counts too
    admin.execute("select cortex.fold_memory_access()")
    counts = admin.execute(
        "select access_count from cortex.memory_nodes where tenant_id = %s and id = any(%s::uuid[])",
        (tenant.id, list(shown)),
    ).fetchall()
    assert [c["access_count"] for c in counts] == [2] * len(shown)


def test_markdown_rendering_is_valid_markdown_in_the_seeds_layout(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant
) -> None:
    result = brief(as_agent, tenant)
    lines = result["text"].split("\n")
    assert lines[0] == "# Cortex Briefing — luna"
    assert re.fullmatch(r"_Generated: \d{4}-\d\d-\d\d \d\d:\d\d UTC \| \d+ nodes consulted_", lines[1])
    assert lines[1].endswith(f"| {result['nodes_consulted']} nodes consulted_") and lines[2] == ""
    headings = [line[3:] for line in lines if line.startswith("## ")]
    assert headings == SECTIONS
    for line in lines[3:]:
        assert line == "" or line.startswith("## ") or BULLET.match(line) or line.startswith("  - evidence: "), line
    # Every heading is preceded by a blank line; bullets sit under their heading.
    for i, line in enumerate(lines):
        if line.startswith("## "):
            assert lines[i - 1] == ""


def test_compact_rendering_fits_the_char_limit_with_more_items(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    for n in range(30):
        pref = node(admin, tenant, "preference", f"Luna habit {n}", "A long explanation " * 10)
        edge(admin, tenant, pref, world["me"], "applies_to", 0.6)
    markdown = brief(as_agent, tenant, max_chars=2000)
    compact = brief(as_agent, tenant, format="compact", max_chars=2000)
    assert len(compact["text"]) <= 2000 and compact["tokens"] == math.ceil(len(compact["text"]) / 4)
    assert len(all_ids(compact)) >= 2 * len(all_ids(markdown))
    assert len(section(compact, "Identity")) > 10  # 4x the per-section limit
    lines = compact["text"].splitlines()
    assert lines[0] == "# Cortex Briefing — luna"
    assert any(line.startswith("**Identity**: luna; Luna ") for line in lines)
    assert "A long explanation" not in compact["text"]  # titles only


# --- integration (seed 001) ------------------------------------------------------------------------


def test_full_briefing_for_a_realistic_agent_graph_of_50_plus_nodes(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    me = world["me"]
    for n in range(20):
        d = node(admin, tenant, "decision", f"Decision {n} about lid order {n}", f"Customer {n} gets option {n}.")
        f = node(admin, tenant, "fact", f"Customer {n} orders lids monthly", source_agent="mia")
        edge(admin, tenant, d, f, "relates_to", 0.7)
        if n % 4 == 0:
            p = node(admin, tenant, "preference", f"Luna keeps note {n} short", importance=0.6)
            edge(admin, tenant, p, me, "applies_to", 0.7)
        if n < 12:  # what others did around Luna's work lately
            e = node(admin, tenant, "event", f"Mia shipped replacement batch {n}", source_agent="mia")
            edge(admin, tenant, e, d, "relates_to", 0.7)
    assert (
        admin.execute("select count(*) as n from cortex.memory_nodes where tenant_id = %s", (tenant.id,)).fetchone()[
            "n"
        ]
        >= 50
    )  # type: ignore[index]
    result = brief(as_agent, tenant)
    assert all(s["items"] for s in result["sections"]), [s["title"] for s in result["sections"] if not s["items"]]
    assert result["nodes_consulted"] >= 50
    assert result["tokens"] <= 2000 and len(result["text"]) <= 8000
    assert len(all_ids(result)) <= 50 and len(set(all_ids(result))) == len(all_ids(result))


def test_briefing_changes_when_new_knowledge_is_added(world: dict[str, str], as_agent: AsAgent, tenant: Tenant) -> None:
    before = brief(as_agent, tenant)
    with as_agent(tenant, "luna") as conn:
        call(conn, "remember", kind="preference", title="Luna signs emails with her first name",
             links=Jsonb([{"target_id": world["me"], "relation": "applies_to", "weight": 0.9}]))  # fmt: skip
        call(conn, "remember", kind="goal", title="Cut refund handling time in half", importance=typed(0.9, "real"))
    after = brief(as_agent, tenant)
    assert "Luna signs emails with her first name" in titles(after, "Identity")
    assert "Cut refund handling time in half" in titles(after, "Goals")
    assert after["text"] != before["text"]


def test_briefing_excludes_decayed_edges(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    fresh = node(admin, tenant, "goal", "Answer every ticket the same day", source_agent="mia")
    stale = node(admin, tenant, "goal", "Migrate tickets to the old helpdesk", source_agent="mia")
    edge(admin, tenant, fresh, world["decision"], "applies_to", 0.8)
    edge(admin, tenant, stale, world["decision"], "applies_to", 0.8, age="200 days")  # 0.8 x 0.5^(200/30) < 0.2
    goals = titles(brief(as_agent, tenant), "Goals")
    assert "Answer every ticket the same day" in goals
    assert "Migrate tickets to the old helpdesk" not in goals


def test_briefing_includes_recently_reinforced_knowledge(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    goal = node(admin, tenant, "goal", "Keep the lid supplier under review", source_agent="mia")
    edge(admin, tenant, goal, world["decision"], "applies_to", 0.8, age="200 days")
    assert "Keep the lid supplier under review" not in titles(brief(as_agent, tenant), "Goals")
    # Mia uses that link again: link_memories reinforces the edge (weight back up, clock reset).
    with as_agent(tenant, "mia") as conn:
        call(conn, "link_memories", source_id=goal, target_id=world["decision"], relation="applies_to")
    assert "Keep the lid supplier under review" in titles(brief(as_agent, tenant), "Goals")


def test_precomputation_updates_the_cache_on_schedule(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin, dsn: str
) -> None:
    def job() -> int:
        row = admin.execute("select cortex.job_precompute_briefings() as r").fetchone()
        assert row is not None
        return int(row["r"]["queued"])

    assert job() == 0  # nobody is configured for it
    settings(admin, tenant, "luna", precompute=True, cache_ttl_seconds=3600)
    assert job() == 1
    job()  # run again while queued: deduplicated by agent
    queued = admin.execute(
        "select count(*) as n from cortex.jobs where tenant_id = %s and kind = 'render_briefing' and status = 'queued'",
        (tenant.id,),
    ).fetchone()
    assert queued is not None and queued["n"] == 1
    with psycopg.connect(dsn, autocommit=True) as worker:
        done = render_briefing(worker, tenant.id, {"agent": "luna"})
    assert set(done["rendered"]) == {"markdown", "compact"}
    admin.execute(
        "update cortex.jobs set status = 'done' where tenant_id = %s and kind = 'render_briefing'", (tenant.id,)
    )
    assert job() == 0  # fresh and at the current version
    read = brief(as_agent, tenant)
    assert read["cached"] is True  # the read did not wait
    # Pre-computation is not a read: only the read above was recorded.
    assert admin.execute("select count(distinct node_id) = count(*) as once from cortex.memory_access").fetchone()[
        "once"
    ]  # type: ignore[index]
    with as_agent(tenant, "luna") as conn:
        call(conn, "remember", kind="fact", title="Batch 43 arrived intact")
    assert job() == 1  # the graph version moved


# --- seed 000 in the briefing ---------------------------------------------------------------------


def test_active_context_names_pending_handoffs_and_owned_contacts_needing_attention(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    with as_agent(tenant, "mia") as conn:
        churning = call(
            conn, "upsert_contact", email="ben@brew.de", name="Ben Brew", stage="churning", owner_agent="luna"
        )
        threaded = call(
            conn, "upsert_contact", email="cleo@cafe.de", name="Cleo Cafe", stage="customer", owner_agent="luna"
        )
        quiet = call(conn, "upsert_contact", email="dan@deli.de", name="Dan Deli", stage="customer", owner_agent="luna")
        call(conn, "log_interaction", contact_id=threaded["id"], type="email_received", direction="inbound",
             subject="Where is my order?", raw_content="Hi, still waiting.", thread_id="t-1")  # fmt: skip
        call(conn, "log_interaction", contact_id=quiet["id"], type="email_sent", direction="outbound",
             subject="Thanks", raw_content="Thanks for your order.", thread_id="t-2")  # fmt: skip
        handoff = call(conn, "create_handoff", contact_id=quiet["id"], to_agent="luna", reason="escalation",
                       context_summary="Dan wants a refund for a damaged pallet.", urgency="high")  # fmt: skip
    admin.execute("update cortex.contact_context set stale_since = now() where contact_id = %s", (quiet["id"],))
    result = brief(as_agent, tenant)
    active = section(result, "Active Context")
    by_title = {i["title"]: i for i in active}
    pending = [i for i in active if i["title"].startswith("Handoff mia -> luna")]
    assert pending and pending[0]["body"].startswith("Pending handoff from mia (escalation, high urgency): Dan wants")
    assert active[0] == pending[0]  # the handoff comes first
    assert by_title["Ben Brew"]["body"].startswith("Needs attention: churn risk (stage churning)")
    assert by_title["Cleo Cafe"]["body"] == 'Needs attention: open thread "Where is my order?"'
    assert "Dan Deli" not in by_title or "stale context" in by_title["Dan Deli"]["body"]
    assert handoff["status"] == "pending"
    # Accepted: no longer pending, no longer in Active Context.
    with as_agent(tenant, "luna") as conn:
        call(conn, "update_handoff_status", handoff_id=handoff["id"], status="accepted")
    assert not [i for i in section(brief(as_agent, tenant), "Active Context") if i["title"].startswith("Handoff")]
    assert churning["owner_agent"] == "luna"


def test_active_context_shows_the_owned_contacts_with_most_reasons_then_the_most_recent(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    # 30 owned contacts need attention; only the section's ten places show, and only the best
    # are looked up: those with two reasons first (churning and an open thread), then the most
    # recently touched of those with one.
    with as_agent(tenant, "mia") as conn:
        contacts = [
            call(conn, "upsert_contact", email=f"o{n:02d}@shop.de", name=f"Shop Owner {n:02d}", stage="churning",
                 owner_agent="luna")
            for n in range(30)
        ]  # fmt: skip
        for c in contacts[10:14]:
            call(conn, "log_interaction", contact_id=c["id"], type="email_received", direction="inbound",
                 subject="Still waiting", raw_content="Hi, any news?", thread_id=f"t-{c['id']}")  # fmt: skip
    for n, c in enumerate(contacts):
        admin.execute("update cortex.contacts set last_touch_at = now() - make_interval(hours => %s) where id = %s",
                      (30 - n, c["id"]))  # fmt: skip
    shown = [i["title"] for i in section(brief(as_agent, tenant), "Active Context")]
    assert shown == [f"Shop Owner {n:02d}" for n in (13, 12, 11, 10, 29, 28, 27, 26, 25, 24)]


# --- cache, paths, errors, isolation ----------------------------------------------------------------


def test_a_cached_briefing_expires_after_its_ttl(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    assert brief(as_agent, tenant)["cached"] is False
    assert brief(as_agent, tenant)["cached"] is True
    admin.execute(
        "update cortex.briefings set generated_at = generated_at - interval '6 minutes' where tenant_id = %s",
        (tenant.id,),
    )
    assert brief(as_agent, tenant)["cached"] is False
    settings(admin, tenant, None, cache_ttl_seconds=0)
    assert brief(as_agent, tenant)["cached"] is False  # no cache at all


def test_http_and_postgrest_paths_return_the_same_briefing(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, client: Any
) -> None:
    sql = brief(as_agent, tenant, format="compact", max_chars=3000)
    response = client.get("/api/v1/briefings/luna?format=compact&max_chars=3000",
                          headers={"Authorization": f"Bearer {tenant.keys['luna']}"})  # fmt: skip
    assert response.status_code == 200, response.text
    http = response.json()
    assert http["cached"] is True and http["text"] == sql["text"] and http["sections"] == sql["sections"]
    fresh = client.get("/api/v1/briefings/luna", headers={"Authorization": f"Bearer {tenant.keys['luna']}"})
    assert fresh.status_code == 200 and fresh.json()["text"].startswith("# Cortex Briefing — luna\n")


@pytest.mark.parametrize(
    ("query", "field"),
    [("format=html", "format"), ("max_chars=100", "max_chars"), ("max_chars=9000", "max_chars")],
)
def test_bad_query_parameters_are_422_naming_the_field(client: Any, tenant: Tenant, query: str, field: str) -> None:
    response = client.get(f"/api/v1/briefings/luna?{query}", headers={"Authorization": f"Bearer {tenant.keys['luna']}"})
    assert response.status_code == 422
    assert field in response.text


def test_http_errors_for_unknown_and_other_agents(client: Any, tenant: Tenant) -> None:
    auth = {"Authorization": f"Bearer {tenant.keys['luna']}"}
    unknown = client.get("/api/v1/briefings/nobody", headers=auth)
    assert unknown.status_code == 422 and "agent" in unknown.text
    assert client.get("/api/v1/briefings/Bad!", headers=auth).status_code == 422
    assert client.get("/api/v1/briefings/mia", headers=auth).status_code == 403
    assert client.get("/api/v1/briefings/luna").status_code == 401
    monitor = client.get("/api/v1/briefings/luna", headers={"Authorization": f"Bearer {tenant.keys['helios']}"})
    assert monitor.status_code == 200 and monitor.json()["scope"] == "shared"


@pytest.mark.parametrize(
    ("args", "field", "code"),
    [
        ({"format": "html"}, "format", 422),
        ({"format": None, "max_chars": 499}, "max_chars", 422),
        ({"max_chars": 8001}, "max_chars", 422),
        ({"agent": "nobody"}, "agent", 422),
        ({"agent": "NOT VALID"}, "agent", 422),
        ({"agent": "mia"}, "agent", 403),
    ],
)
def test_bad_input_on_the_sql_path_names_the_field(
    as_agent: AsAgent, tenant: Tenant, args: dict[str, Any], field: str, code: int
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "get_briefing", **args)
    assert err.value.status == code and err.value.field == field


def test_private_memories_never_reach_another_agents_briefing(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    secret = node(admin, tenant, "preference", "Luna's private shortcut for refunds", visibility="private")
    edge(admin, tenant, secret, world["me"], "applies_to", 0.9)
    mia_secret = node(
        admin, tenant, "decision", "Mia's private pricing decision", source_agent="mia", visibility="private"
    )
    edge(admin, tenant, mia_secret, world["decision"], "relates_to", 0.9)
    own = brief(as_agent, tenant)
    assert "Luna's private shortcut for refunds" in own["text"]  # her own private memory
    assert "Mia's private pricing decision" not in own["text"]
    monitor = brief(as_agent, tenant, "helios", agent="luna")
    assert monitor["scope"] == "shared" and "private" not in monitor["text"]
    mia = brief(as_agent, tenant, "mia")
    assert "Luna's private shortcut" not in mia["text"]
    # The agent's own cached copy is not the monitor's.
    assert brief(as_agent, tenant)["cached"] is True
    assert "Luna's private shortcut for refunds" in brief(as_agent, tenant)["text"]
    # A monitor cannot read the agent-scope cache row, nor luna another agent's.
    with as_agent(tenant, "helios") as conn:
        rows = conn.execute("select agent, scope from cortex.briefings").fetchall()
    assert {tuple(r) for r in rows} == {("luna", "shared")}


def test_tenants_are_isolated(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, other_tenant: Tenant, admin: Admin
) -> None:
    theirs = agent_node(admin, other_tenant)
    other = node(admin, other_tenant, "preference", "Globex Luna likes long reports")
    edge(admin, other_tenant, other, theirs, "applies_to", 0.9)
    mine = brief(as_agent, tenant)
    yours = brief(as_agent, other_tenant)
    assert "Globex Luna likes long reports" not in mine["text"]
    assert "Globex Luna likes long reports" in yours["text"]
    assert "Luna answers in plain language" not in yours["text"]
    with as_agent(other_tenant, "luna") as conn:
        assert (
            conn.execute("select count(*) from cortex.briefings where tenant_id = %s", (tenant.id,)).fetchone()[0] == 0
        )  # type: ignore[index]


def test_settings_are_validated_and_agent_overrides_clear(admin: Admin, tenant: Tenant) -> None:
    for values, field in [({"colour": 1}, "colour"), ({"max_chars": 9000}, "max_chars"),
                          ({"min_weight": "heavy"}, "min_weight"), ({"precompute": None}, "precompute")]:  # fmt: skip
        with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
            settings(admin, tenant, None, **values)
        assert err.value.diag.column_name == field
    with pytest.raises(psycopg.errors.NoDataFound):
        settings(admin, tenant, "nobody", max_chars=1000)
    assert settings(admin, tenant, "luna", max_chars=1000)["effective"]["max_chars"] == 1000
    cleared = settings(admin, tenant, "luna", max_chars=None)
    assert cleared["effective"]["max_chars"] == 8000 and cleared["override"]["max_chars"] is None
    defaults = settings(admin, tenant, None)["effective"]
    assert defaults == defaults | {"max_items_per_section": 10, "max_total_items": 50, "max_chars": 8000,
                                   "recent_window_hours": 48, "cache_ttl_seconds": 300, "include_contradictions": True,
                                   "precompute": False}  # fmt: skip
    assert math.isclose(defaults["min_importance"], 0.3, rel_tol=1e-6)
    assert math.isclose(defaults["min_weight"], 0.2, rel_tol=1e-6)


def test_without_contradictions_there_is_no_unresolved_section(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    settings(admin, tenant, "luna", include_contradictions=False)
    result = brief(as_agent, tenant)
    assert [s["title"] for s in result["sections"]] == [s for s in SECTIONS if s != "Unresolved"]
    assert "## Unresolved" not in result["text"]


def test_nodes_below_the_thresholds_are_left_out(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    minor = node(admin, tenant, "preference", "Luna likes blue pens", importance=0.1)
    edge(admin, tenant, minor, world["me"], "applies_to", 0.9)
    weak = node(admin, tenant, "preference", "Luna likes green tea", importance=0.9)
    edge(admin, tenant, weak, world["me"], "applies_to", 0.1)
    identity = titles(brief(as_agent, tenant), "Identity")
    assert "Luna likes blue pens" not in identity and "Luna likes green tea" not in identity


def test_the_agents_own_goals_flags_and_unsure_facts_show_without_links_most_important_first(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    own_goals = [node(admin, tenant, "goal", f"Own goal {n}", importance=0.3 + n * 0.05) for n in range(12)]
    node(admin, tenant, "goal", "Mia's goal far from Luna", source_agent="mia", importance=1.0)
    unsure = node(admin, tenant, "fact", "The depot may have moved", confidence=0.2)
    flagged = node(admin, tenant, "fact", "Refund rules of the old shop", needs_review=True, review_reason="outdated")
    # More Identity candidates than places, the strongest of them below min_importance.
    for n in range(12):
        minor = node(admin, tenant, "preference", f"Minor preference {n}", importance=0.1)
        edge(admin, tenant, minor, world["me"], "applies_to", 1.0)
    result = brief(as_agent, tenant)
    goals = [i["id"] for i in section(result, "Goals")]
    # The goal near Luna's work (0.9), then her nine most important own ones (0.85 down to 0.45).
    assert goals == [world["goal"], *reversed(own_goals[3:])]
    unresolved = [i["id"] for i in section(result, "Unresolved")]
    assert unsure in unresolved and flagged in unresolved
    assert sorted(titles(result, "Identity")[1:]) == ["Luna answers in plain language",
                                                      "Luna can issue refunds up to 200 EUR"]  # fmt: skip


def test_identity_finds_its_top_items_behind_many_stronger_edges_of_weaker_nodes(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    # Identity reads the edges that apply to the agent strongest first, in batches, and stops once no
    # unread edge can outrank what it has: 150 strong edges of minor facts (importance 0.31, score at
    # most 0.28) come first, and the top ten must still be the important ones behind them (0.5).
    for n in range(150):
        minor = node(admin, tenant, "fact", f"Minor fact {n:03d}", importance=0.31)
        edge(admin, tenant, minor, world["me"], "applies_to", 0.9 - n * 0.002)
    important = [node(admin, tenant, "preference", f"Important preference {n:02d}", importance=1.0) for n in range(15)]
    for n, pref in enumerate(important):
        edge(admin, tenant, pref, world["me"], "applies_to", 0.505 - n * 0.01)
    result = brief(as_agent, tenant)
    identity = [i["id"] for i in section(result, "Identity")]
    assert identity[0] == world["me"]
    # The two of the world (0.9 x 0.5 = 0.45 each) rank among the important ones (0.505 down to 0.365);
    # ten items in all, the agent node first.
    assert identity[1:] == [*important[:6], *sorted([world["pref"], world["capability"]]), important[6]]


def test_search_memories_with_anchors_accepts_its_full_limit(
    world: dict[str, str], as_agent: AsAgent, tenant: Tenant
) -> None:
    """Regression: a limit above 12 made search_memories ask graph_walk for more than its 500 rows."""
    with as_agent(tenant, "luna") as conn:
        result = call(conn, "search_memories", anchors=[world["decision"]], **{"limit": 50})
    assert world["linked_fact"] in [r["memory"]["id"] for r in result["results"]]


def test_every_section_of_every_demo_agents_briefing_has_content(dsn: str, admin: Admin, as_agent: AsAgent) -> None:
    from cortex import demo
    from tests.test_supabase_layout import _apply_seed

    _apply_seed(dsn)
    row = admin.execute("select id::text from cortex.tenants where slug = %s", (demo.TENANT_SLUG,)).fetchone()
    assert row is not None
    top_cup = Tenant(row["id"], demo.TENANT_SLUG)
    for name, *_ in demo.AGENTS:
        result = brief(as_agent, top_cup, name)
        empty = [s["title"] for s in result["sections"] if not s["items"]]
        assert empty == [], (name, empty)
        assert result["tokens"] <= 2000
    precomputed = admin.execute(
        "select agent from cortex.briefing_settings where tenant_id = %s and precompute", (top_cup.id,)
    ).fetchall()
    assert [r["agent"] for r in precomputed] == list(demo.PRECOMPUTE)
