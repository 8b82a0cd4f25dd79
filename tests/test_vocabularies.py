"""Each vocabulary is defined once in SQL (an immutable `cortex.<name>()` returning text[]) and
read by the CHECK constraints, the functions' validation and, here, compared with the Python
Literal of the same list, so the three can never drift apart."""

from __future__ import annotations

from typing import Any, get_args

import psycopg
import pytest

from cortex import llm
from cortex.briefings import models as briefings
from cortex.consolidation import models as consolidation
from cortex.contacts import models as contacts
from cortex.customers import models as customers
from cortex.graph import models as graph
from cortex.handoffs import models as handoffs
from cortex.ingest import models as ingest
from cortex.interactions import models as interactions
from cortex.usage import budget
from cortex.usage import models as usage
from cortex.voice import models as voice
from tests.conftest import Tenant

# SQL vocabulary function -> the Python Literal that must list the same values in the same order.
PARITY: dict[str, Any] = {
    "contact_stages": contacts.Stage,
    "interaction_types": interactions.InteractionType,
    "interaction_directions": interactions.Direction,
    "analysis_statuses": interactions.AnalysisStatus,
    "sentiments": llm.Sentiment,
    "intents": llm.Intent,
    "handoff_reasons": handoffs.HandoffReason,
    "handoff_urgencies": handoffs.Urgency,
    "handoff_statuses": handoffs.HandoffStatus,
    "usage_periods": usage.UsageSummaryQuery.model_fields["period"].annotation,
    "budget_recommendations": usage.BudgetCheck.model_fields["recommendation"].annotation,
    "reservation_actions": budget.Action,
    "memory_kinds": graph.MemoryKind,
    "entity_kinds": graph.EntityKind,
    "node_kinds": graph.NodeKind,
    "edge_relations": graph.Relation,
    "memory_statuses": graph.MemoryStatus,
    "memory_visibilities": graph.Visibility,
    "index_statuses": graph.IndexStatus,
    "node_ref_kinds": graph.NodeRefKind,
    "graph_directions": graph.GraphDirection,
    "traversal_strategies": graph.TraversalStrategy,
    "briefing_formats": briefings.BriefingFormat,
    "briefing_scopes": briefings.BriefingScope,
    "briefing_sections": briefings.SectionTitle,
    "ingest_formats": ingest.IngestFormat,
    "ingest_statuses": ingest.IngestStatus,
    "ingest_sources": ingest.IngestSource,
    "voice_sentiments": llm.VoiceSentiment,
    "voice_profile_sources": voice.ProfileSource,
    "voice_call_statuses": voice.CallStatus,
    "consolidation_agents": consolidation.AgentName,
    "consolidation_statuses": consolidation.ItemStatus,
    "consolidation_urgencies": consolidation.Urgency,
    "customer_statuses": customers.CustomerStatus,
    "customer_event_types": customers.EventType,
    "customer_project_statuses": customers.ProjectStatus,
    "customer_artifact_types": customers.ArtifactType,
    "customer_artifact_statuses": customers.ArtifactStatus,
    "customer_agents": customers.AgentType,
}
# Vocabularies with no Python Literal (yet): still defined once in SQL and used by their CHECKs.
SQL_ONLY = (
    "agent_roles",
    "queue_statuses",
    "alert_severities",
    "outbox_statuses",
    "consolidation_change_kinds",
    "consolidation_run_statuses",
    "customer_agreement_statuses",
    "customer_receivable_types",
)

# Which column's CHECK each vocabulary guards (table.column), to prove the constraint reads it.
CHECKED_BY: dict[str, tuple[str, str]] = {
    "contact_stages": ("contacts", "stage"),
    "interaction_types": ("interactions", "type"),
    "interaction_directions": ("interactions", "direction"),
    "analysis_statuses": ("interactions", "analysis_status"),
    "sentiments": ("interactions", "sentiment"),
    "intents": ("interactions", "intent"),
    "handoff_reasons": ("handoff_events", "reason"),
    "handoff_urgencies": ("handoff_events", "urgency"),
    "handoff_statuses": ("handoff_events", "status"),
    "agent_roles": ("agents", "role"),
    "queue_statuses": ("jobs", "status"),
    "alert_severities": ("alerts", "severity"),
    "outbox_statuses": ("outbox", "status"),
    "reservation_actions": ("token_reservations", "action"),
    "node_kinds": ("memory_nodes", "kind"),
    "edge_relations": ("memory_edges", "relation"),
    "memory_statuses": ("memory_nodes", "status"),
    "memory_visibilities": ("memory_nodes", "visibility"),
    "index_statuses": ("memory_nodes", "embed_status"),
    "node_ref_kinds": ("memory_nodes", "ref_kind"),
    "briefing_formats": ("briefings", "format"),
    "briefing_scopes": ("briefings", "scope"),
    "ingest_formats": ("ingest_files", "format"),
    "ingest_statuses": ("ingest_files", "status"),
    "ingest_sources": ("ingest_files", "source"),
    "voice_sentiments": ("voice_caller_states", "sentiment"),
    "voice_profile_sources": ("voice_agents", "profile_source"),
    "voice_call_statuses": ("voice_calls", "status"),
    "consolidation_agents": ("consolidation_items", "agent"),
    "consolidation_statuses": ("consolidation_items", "status"),
    "consolidation_urgencies": ("consolidation_items", "urgency"),
    "consolidation_change_kinds": ("consolidation_changes", "change"),
    "consolidation_run_statuses": ("consolidation_runs", "status"),
    "customer_project_statuses": ("customer_projects", "status"),
    "customer_artifact_types": ("customer_artifacts", "type"),
    "customer_artifact_statuses": ("customer_artifacts", "status"),
    "customer_agreement_statuses": ("customer_agreements", "status"),
    "customer_receivable_types": ("customer_receivables", "type"),
}


def _sql_list(admin: Any, name: str) -> list[str]:
    row = admin.execute(f"select cortex.{name}() as v").fetchone()
    assert row is not None
    return list(row["v"])


@pytest.mark.parametrize("name", sorted(PARITY))
def test_sql_vocabulary_equals_the_python_literal(admin: Any, name: str) -> None:
    assert _sql_list(admin, name) == list(get_args(PARITY[name])), f"cortex.{name}() and its Literal differ"


@pytest.mark.parametrize("name", sorted(CHECKED_BY))
def test_the_check_constraint_reads_the_vocabulary_function(admin: Any, name: str) -> None:
    table, column = CHECKED_BY[name]
    defs = [
        r["def"]
        for r in admin.execute(
            """select pg_get_constraintdef(con.oid) as def from pg_constraint con
               join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
               where n.nspname = 'cortex' and c.relname = %s and con.contype = 'c'""",
            (table,),
        ).fetchall()
    ]
    assert any(f"{name}()" in d and column in d for d in defs), (table, column, defs)


def test_vocabularies_are_immutable_documented_functions(admin: Any) -> None:
    rows = admin.execute(
        """select p.proname, p.provolatile, obj_description(p.oid, 'pg_proc') as doc
           from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where n.nspname = 'cortex' and p.proname = any (%s)""",
        (list(PARITY) + list(SQL_ONLY),),
    ).fetchall()
    assert {r["proname"] for r in rows} == set(PARITY) | set(SQL_ONLY)
    assert all(r["provolatile"] == "i" and r["doc"] for r in rows)


def test_no_check_constraint_spells_out_a_list_of_its_own(admin: Any) -> None:
    """A CHECK written as `x in ('a', 'b')` is a second copy of a vocabulary: use cortex.<name>()."""
    offenders = [
        r["name"]
        for r in admin.execute(
            """select c.relname || '.' || con.conname as name from pg_constraint con
               join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
               where n.nspname in ('cortex', 'public') and con.contype = 'c'
                 and pg_get_constraintdef(con.oid) ~ 'ANY \\(\\(?ARRAY\\['"""
        ).fetchall()
    ]
    assert offenders == []


def test_the_rule_catches_a_spelled_out_list(admin: Any) -> None:
    admin.execute("create table cortex.leaky_vocab (tenant_id uuid, v text check (v in ('a', 'b')))")
    found = admin.execute(
        """select count(*) as n from pg_constraint con join pg_class c on c.oid = con.conrelid
           where c.relname = 'leaky_vocab' and pg_get_constraintdef(con.oid) ~ 'ANY \\(\\(?ARRAY\\['"""
    ).fetchone()
    assert found is not None and found["n"] == 1


def test_a_value_outside_the_vocabulary_is_refused_by_the_table(admin: Any, tenant: Tenant) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        admin.execute(
            "insert into cortex.contacts (tenant_id, email, stage) values (%s, 'x@acme.com', 'not-a-stage')",
            (tenant.id,),
        )
    with pytest.raises(psycopg.errors.CheckViolation):
        admin.execute("update cortex.agents set role = 'overlord' where tenant_id = %s and name = 'luna'", (tenant.id,))
