"""Backfill: POST /interactions/import, import_interactions (SQL) and `cortex import FILE`; occurred_at."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from starlette.testclient import TestClient

from cortex import routing
from cortex.cli import main
from cortex.db import Jsonb, agent_claims, call, typed
from cortex.errors import CortexError
from cortex.interactions import backfill
from cortex.interactions import service as interactions
from cortex.interactions.jobs import render_contexts
from cortex.queue import worker
from tests.conftest import AsAgent, Tenant
from tests.test_context import ENVELOPE, assert_rendered_is_fresh, fresh_assembly, store

V1 = "/api/v1"
Admin = psycopg.Connection[dict[str, Any]]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def item(contact_id: str, n: int, when: str, **extra: Any) -> dict[str, Any]:
    return {
        "contact_id": contact_id,
        "type": "email_received",
        "external_id": f"mail-{n}",
        "occurred_at": when,
        "subject": f"Mail {n}",
        "raw_content": f"Hello, this is mail number {n}. Please call me back.",
        **extra,
    }


def count(admin: Admin, rows: str, *params: Any) -> int:
    row = admin.execute(f"select count(*) as n from {rows}", params).fetchone()
    assert row is not None
    return int(row["n"])


def contact_row(admin: Admin, contact_id: str) -> dict[str, Any]:
    row = admin.execute(
        "select interaction_count, first_touch_at, last_touch_at, last_touch_agent from cortex.contacts where id = %s",
        (contact_id,),
    ).fetchone()
    assert row is not None
    return row


# --- HTTP -----------------------------------------------------------------------------------------


def test_a_json_array_is_stored_once_and_a_reimport_inserts_nothing(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    body = [item(contact["id"], n, f"2024-0{n}-01T10:00:00Z") for n in range(1, 4)]
    first = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body)
    assert first.status_code == 200, first.text
    assert first.json() == {"received": 3, "inserted": 3, "duplicates": 0, "failed": 0, "summaries_queued": 3,
                            "errors": []}  # fmt: skip
    again = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body)
    assert again.json()["inserted"] == 0 and again.json()["duplicates"] == 3
    assert count(admin, "cortex.interactions") == 3
    assert count(admin, "cortex.jobs where kind = 'summarise_interaction'") == 3
    # Each job is attributable to the interaction's agent.
    jobs = admin.execute("select payload from cortex.jobs where kind = 'summarise_interaction'").fetchall()
    assert {j["payload"]["agent"] for j in jobs} == {"luna"}
    assert contact_row(admin, contact["id"])["interaction_count"] == 3


def test_json_lines_report_bad_lines_by_index_and_store_the_rest(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    lines = [
        json.dumps(item(contact["id"], 1, "2024-01-01T10:00:00Z")),
        "{not json",
        "",
        json.dumps(item(contact["id"], 2, "2024-01-02T10:00:00")),  # no zone: UTC
        json.dumps(item(contact["id"], 3, "2024-01-03T10:00:00Z", subject="nul \u0000 here")),
    ]
    response = client.post(
        f"{V1}/interactions/import",
        headers={**bearer(tenant.keys["luna"]), "Content-Type": "application/x-ndjson"},
        content="\n".join(lines) + "\n",
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["received"], result["inserted"], result["failed"]) == (4, 2, 2)
    assert [(e["index"], e["field"]) for e in result["errors"]] == [(1, "item"), (4, "subject")]
    stored = admin.execute("select external_id, occurred_at from cortex.interactions order by external_id").fetchall()
    assert [r["external_id"] for r in stored] == ["mail-1", "mail-2"]
    assert stored[1]["occurred_at"] == datetime(2024, 1, 2, 10, tzinfo=UTC)


def test_bad_rows_name_index_and_field_and_write_nothing_of_themselves(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    body: list[Any] = [
        item(contact["id"], 1, "2024-01-01T00:00:00Z"),
        item(contact["id"], 2, future),
        item(contact["id"], 3, "now"),
        {**item(contact["id"], 4, "2024-01-01T00:00:00Z"), "type": "fax"},
        {**item(contact["id"], 5, "2024-01-01T00:00:00Z"), "external_id": None},
        {**item(contact["id"], 6, "2024-01-01T00:00:00Z"), "colour": "red"},
        {**item(contact["id"], 7, "2024-01-01T00:00:00Z"), "agent": "mia"},
        {**item(contact["id"], 8, "2024-01-01T00:00:00Z"), "metadata": [1]},
        "not an object",
        {**item(contact["id"], 10, "2024-01-01T00:00:00Z"), "contact_id": None, "contact_email": "nobody@x.co"},
        {**item("00000000-0000-4000-8000-000000000000", 11, "2024-01-01T00:00:00Z")},
    ]
    result = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body).json()
    assert [(e["index"], e["field"]) for e in result["errors"]] == [
        (1, "occurred_at"), (2, "occurred_at"), (3, "type"), (4, "external_id"), (5, "colour"), (6, "agent"),
        (7, "metadata"), (8, "item"), (9, "contact_email"), (10, "contact_id"),
    ]  # fmt: skip
    assert "future" in result["errors"][0]["message"]
    assert "unknown contact" in result["errors"][-1]["message"]
    assert (result["inserted"], result["failed"]) == (1, 10)
    assert [r["external_id"] for r in admin.execute("select external_id from cortex.interactions").fetchall()] == [
        "mail-1"
    ]
    assert contact_row(admin, contact["id"])["interaction_count"] == 1
    assert count(admin, "cortex.jobs where kind = 'summarise_interaction'") == 1


def test_contact_by_email_and_agent_human(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    body = [
        {"contact_email": " JOHN@acme.com ", "type": "call", "external_id": "c-1",
         "occurred_at": "2023-05-01T09:00:00Z", "agent": "human", "human_id": "sam",
         "summary": "Called about pricing", "sentiment": "positive"},
    ]  # fmt: skip
    result = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body).json()
    assert result["inserted"] == 1 and result["summaries_queued"] == 0  # brought its own summary
    row = admin.execute("select contact_id::text, agent, human_id, analysis_status from cortex.interactions").fetchone()
    assert row == {"contact_id": contact["id"], "agent": "human", "human_id": "sam", "analysis_status": "done"}


def test_a_read_only_agent_gets_403_and_nothing_is_written(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    body = [item(contact["id"], 1, "2024-01-01T00:00:00Z")]
    response = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["helios"]), json=body)
    assert response.status_code == 403
    assert count(admin, "cortex.interactions") == 0 and count(admin, "cortex.jobs") == 0


def test_another_tenants_contact_is_unknown(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    body = [item(contact["id"], 1, "2024-01-01T00:00:00Z"), {**item("x", 2, "2024-01-01T00:00:00Z"),
            "contact_id": None, "contact_email": "john@acme.com"}]  # fmt: skip
    result = client.post(f"{V1}/interactions/import", headers=bearer(other_tenant.keys["luna"]), json=body).json()
    assert result["inserted"] == 0
    assert [(e["field"], "unknown contact" in e["message"]) for e in result["errors"]] == [
        ("contact_id", True), ("contact_email", True)
    ]  # fmt: skip
    assert count(admin, "cortex.interactions") == 0


def test_the_body_size_limit_applies(client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "MAX_BODY_BYTES", 100)
    body = [item("00000000-0000-4000-8000-000000000000", n, "2024-01-01T00:00:00Z") for n in range(5)]
    response = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body)
    assert response.status_code == 413


def test_not_an_array_is_422_and_too_many_items_422(client: TestClient, tenant: Tenant) -> None:
    one = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json={"type": "note"})
    assert one.status_code == 422 and one.json()["error"]["field"] == "body"
    many = client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=[{}] * 5001)
    assert many.status_code == 422


# --- occurred_at -------------------------------------------------------------------------------------


def test_an_old_import_does_not_become_the_latest(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], as_agent: AsAgent, admin: Admin
) -> None:
    live = interactions.log_interaction(
        agent_claims(tenant.id, "mia"), contact_id=contact["id"], type="note", raw_content="Live note today."
    )
    before = contact_row(admin, contact["id"])
    body = [item(contact["id"], 1, "2020-06-01T00:00:00Z"), item(contact["id"], 2, "2019-06-01T00:00:00Z")]
    assert (
        client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body).json()["inserted"] == 2
    )
    after = contact_row(admin, contact["id"])
    assert after["last_touch_at"] == before["last_touch_at"] and after["last_touch_agent"] == "mia"
    assert after["first_touch_at"] == datetime(2019, 6, 1, tzinfo=UTC)
    assert after["interaction_count"] == 3
    with as_agent(tenant, "luna") as conn:
        listed = call(conn, "list_interactions", contact_id=contact["id"])["items"]
        since = call(conn, "list_interactions", contact_id=contact["id"], since=datetime(2020, 1, 1, tzinfo=UTC))
        level2 = call(conn, "get_context", contact_id=contact["id"], level=2)
    assert listed[0]["id"] == live["id"]
    assert [i["external_id"] for i in listed][1:] == ["mail-1", "mail-2"]
    assert len(since["items"]) == 2
    recent = level2["content"]["recent_interactions"] if "content" in level2 else level2["recent_interactions"]
    assert recent[0]["id"] == live["id"]
    assert [r["date"][:10] for r in recent][1:] == ["2020-06-01", "2019-06-01"]


def test_an_import_newer_than_the_last_touch_moves_it(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    old = [item(contact["id"], 1, "2020-06-01T00:00:00Z")]
    client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["mia"]), json=old)
    newer = [item(contact["id"], 2, "2021-06-01T00:00:00Z")]
    client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=newer)
    row = contact_row(admin, contact["id"])
    assert row["last_touch_at"] == datetime(2021, 6, 1, tzinfo=UTC) and row["last_touch_agent"] == "luna"


def test_occurred_at_is_append_only_and_defaults_to_created_at(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Admin
) -> None:
    with as_agent(tenant, "luna") as conn:
        logged = call(conn, "log_interaction", contact_id=contact["id"], type="note", summary="A note")
    assert logged["occurred_at"] == logged["created_at"]
    with pytest.raises(psycopg.Error) as refused:
        admin.execute("update cortex.interactions set occurred_at = occurred_at - interval '1 day'")
    assert refused.value.sqlstate == "55000"
    with pytest.raises(psycopg.Error) as future:
        admin.execute(
            "insert into cortex.interactions (tenant_id, contact_id, agent, type, occurred_at) "
            "values (%s, %s, 'luna', 'note', now() + interval '1 hour')",
            (tenant.id, contact["id"]),
        )
    assert future.value.sqlstate == "23514"


def test_import_over_postgrest_checks_the_items_argument(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(CortexError) as not_array, as_agent(tenant, "luna") as conn:
        call(conn, "import_interactions", items=Jsonb({"a": 1}))
    assert not_array.value.status == 422 and not_array.value.field == "items"


# --- summaries in the background ---------------------------------------------------------------------


def test_the_worker_summarises_imported_rows_attributed_to_their_agent(
    client: TestClient, dsn: str, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    body = [item(contact["id"], n, f"2022-01-0{n}T00:00:00Z") for n in range(1, 4)]
    client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["anna"]), json=body)
    assert count(admin, "cortex.token_usage") == 0  # the import itself called no model
    with psycopg.connect(dsn, autocommit=True) as queue_conn:
        assert worker.run_once(queue_conn, "w1", batch=10) == 4  # three summaries, one render_contexts
    assert count(admin, "cortex.interactions where analysis_status = 'done' and summary is not null") == 3
    usage = admin.execute("select distinct agent, operation from cortex.token_usage").fetchall()
    assert usage == [{"agent": "anna", "operation": "summarize"}]
    # Old significant history makes the context stale by count, but queues no refresh at once.
    assert count(admin, "cortex.jobs where kind = 'generate_context'") == 0


# --- contexts after an import: rendered by the worker, assembled until then -----------------------


def reads_equal_a_fresh_assembly(admin: Admin, as_agent: AsAgent, tenant: Tenant, contact_id: str) -> None:
    """get_context at levels 0-2, whether rendered or not, is what an assembly now would be."""
    for level in (0, 1, 2):
        with as_agent(tenant, "mia") as conn:
            got = call(conn, "get_context", contact_id=contact_id, level=level)
        fresh = fresh_assembly(admin, tenant, contact_id, level)
        assert {k: v for k, v in got.items() if k not in ENVELOPE} == fresh["content"], level
        assert (got["is_stale"], got["generated_at"]) == (fresh["stale"], fresh["generated_at"]), level


def rendered(admin: Admin, *contact_ids: str) -> set[str]:
    rows = admin.execute(
        "select contact_id::text as c from cortex.context_levels where contact_id = any (%s::uuid[])",
        (list(contact_ids),),
    ).fetchall()
    return {r["c"] for r in rows}


def run_render_jobs(dsn: str, tenant: Tenant) -> list[dict[str, Any]]:
    """Runs only the queued render_contexts jobs' handler (the summaries would render at their own
    commit and hide what the job does)."""
    with psycopg.connect(dsn, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        jobs = conn.execute("select payload from cortex.jobs where kind = 'render_contexts' order by id").fetchall()
        return [render_contexts(conn, tenant.id, j["payload"]) for j in jobs]


def test_an_import_leaves_rendering_to_the_worker_and_reads_assemble_until_then(
    client: TestClient, dsn: str, tenant: Tenant, as_agent: AsAgent, admin: Admin, contact: dict[str, Any]
) -> None:
    cid = contact["id"]
    with as_agent(tenant, "luna") as conn:
        other = call(conn, "upsert_contact", email="ada@example.com", name="Ada")["id"]
    store(as_agent, tenant, cid)  # a generated context: fresh until the import adds interactions
    assert rendered(admin, cid, other) == {cid, other}
    body = [item(cid, 1, "2024-01-01T10:00:00Z"), item(cid, 2, "2024-02-01T10:00:00Z"),
            item(other, 3, "2024-03-01T10:00:00Z")]  # fmt: skip
    assert client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body).status_code == 200
    # Not rendered at commit: the rows are gone and one job names both contacts.
    assert rendered(admin, cid, other) == set()
    jobs = admin.execute("select payload from cortex.jobs where kind = 'render_contexts'").fetchall()
    assert len(jobs) == 1 and sorted(jobs[0]["payload"]["contact_ids"]) == sorted([cid, other])
    # Meanwhile a read assembles: the imported rows are there and the context is stale by count.
    reads_equal_a_fresh_assembly(admin, as_agent, tenant, cid)
    reads_equal_a_fresh_assembly(admin, as_agent, tenant, other)
    with as_agent(tenant, "mia") as conn:
        level2 = call(conn, "get_context", contact_id=cid, level=2)
    assert level2["is_stale"] is True and level2["interactions_total"] == 2
    assert [r["date"][:10] for r in level2["recent_interactions"]] == ["2024-02-01", "2024-01-01"]
    # That stale read queued a regeneration, which marks the context stale: a write of the contact,
    # rendered at its commit. The other contact has no context to mark and waits for the job.
    assert rendered(admin, cid, other) == {cid}
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "stale read after the import")

    assert run_render_jobs(dsn, tenant) == [{"contacts": 2, "rendered": 1}]
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "render_contexts job")
    assert_rendered_is_fresh(admin, as_agent, tenant, other, "render_contexts job")
    # Run again (a retried job): nothing left to render.
    assert run_render_jobs(dsn, tenant) == [{"contacts": 2, "rendered": 0}]


def test_a_later_write_renders_at_its_commit_and_the_job_skips_it_and_deleted_contacts(
    client: TestClient, dsn: str, tenant: Tenant, as_agent: AsAgent, admin: Admin, contact: dict[str, Any]
) -> None:
    cid = contact["id"]
    with as_agent(tenant, "luna") as conn:
        gone = call(conn, "upsert_contact", email="gone@example.com", name="Gone")["id"]
    body = [item(cid, 1, "2024-01-01T10:00:00Z"), item(gone, 2, "2024-01-01T10:00:00Z")]
    client.post(f"{V1}/interactions/import", headers=bearer(tenant.keys["luna"]), json=body)
    with as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", contact_id=cid, type="note", summary="Called back about the order.")
    assert rendered(admin, cid) == {cid}
    admin.execute("delete from cortex.contacts where id = %s", (gone,))
    assert run_render_jobs(dsn, tenant) == [{"contacts": 2, "rendered": 0}]
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "write after the import")


def test_in_one_transaction_other_writes_render_at_commit_and_reads_see_the_import(
    tenant: Tenant, as_agent: AsAgent, admin: Admin, contact: dict[str, Any]
) -> None:
    cid = contact["id"]
    with as_agent(tenant, "luna") as conn:
        other = call(conn, "upsert_contact", email="ada@example.com", name="Ada")["id"]
    with as_agent(tenant, "luna") as conn:
        call(conn, "update_contact", contact_id=other, patch={"name": "Ada Lovelace"})
        call(conn, "update_contact", contact_id=cid, patch={"name": "Johanna Smith"})
        result = call(conn, "import_interactions", items=Jsonb([item(cid, 1, "2024-01-01T10:00:00Z")]))
        assert result["inserted"] == 1
        inside = call(conn, "get_context", contact_id=cid, level=2)
    assert inside["header"]["name"] == "Johanna Smith" and inside["interactions_total"] == 1
    # The contact only patched is rendered at commit; the imported one waits for the worker.
    assert rendered(admin, cid, other) == {other}
    assert_rendered_is_fresh(admin, as_agent, tenant, other, "patch beside an import")
    reads_equal_a_fresh_assembly(admin, as_agent, tenant, cid)


def test_defer_context_render_only_reaches_the_callers_own_contacts(
    tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, admin: Admin, contact: dict[str, Any]
) -> None:
    with as_agent(other_tenant, "luna") as conn:
        ids = typed([contact["id"]], "uuid[]")
        assert call(conn, "cortex.defer_context_render", p_contact_ids=ids, p_reason="probe") is None
    assert rendered(admin, contact["id"]) == {contact["id"]}
    assert count(admin, "cortex.jobs") == 0


# --- cortex import FILE ----------------------------------------------------------------------------


def cortex(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.output}"
    return result


def test_cli_imports_jsonl_with_a_json_summary_and_reruns_insert_nothing(
    dsn: str, tenant: Tenant, contact: dict[str, Any], admin: Admin, tmp_path: Path
) -> None:
    path = tmp_path / "mails.jsonl"
    path.write_text("\n".join(json.dumps(item(contact["id"], n, "2023-01-01T00:00:00Z")) for n in range(25)) + "\n")
    t = ("--tenant", tenant.slug, "--agent", "luna")
    summary = json.loads(cortex("--json", *t, "import", str(path), "--batch-size", "10").stdout)
    assert (summary["received"], summary["inserted"], summary["duplicates"], summary["failed"]) == (25, 25, 0, 0)
    assert not (tmp_path / "mails.jsonl.cortex-import").exists()
    again = json.loads(cortex("--json", *t, "import", str(path)).stdout)
    assert (again["inserted"], again["duplicates"]) == (0, 25)
    assert count(admin, "cortex.interactions") == 25


def test_cli_imports_csv_with_tags_metadata_and_reports_bad_records(
    dsn: str, tenant: Tenant, contact: dict[str, Any], admin: Admin, tmp_path: Path
) -> None:
    path = tmp_path / "calls.csv"
    path.write_text(
        "contact_email,type,external_id,occurred_at,subject,raw_content,tags,metadata,metadata.duration_s\n"
        "john@acme.com,call,c-1,2023-02-01T10:00:00Z,Pricing,"
        '"Long call,\nabout pricing",vip;pricing,"{""crm"": ""hubspot""}",310\n'
        "john@acme.com,fax,c-2,2023-02-02T10:00:00Z,Bad,bad type,,,\n"
        "john@acme.com,note,c-3,2023-02-03T10:00:00Z,Note,,,{broken,\n"
    )
    result = cortex("--json", "--tenant", tenant.slug, "--agent", "luna", "import", str(path), code=1)
    summary = json.loads(result.stdout)
    assert summary["inserted"] == 1
    assert [(e["record"], e["field"]) for e in summary["errors"]] == [(2, "type"), (3, "item")]
    row = admin.execute("select raw_content, metadata from cortex.interactions").fetchone()
    assert row == {"raw_content": "Long call,\nabout pricing",
                   "metadata": {"crm": "hubspot", "tags": ["vip", "pricing"], "duration_s": 310}}  # fmt: skip
    unknown = tmp_path / "bad.csv"
    unknown.write_text("contact_email,colour\njohn@acme.com,red\n")
    refused = cortex("--tenant", tenant.slug, "--agent", "luna", "import", str(unknown), code=2)
    assert "unknown CSV column" in refused.output


def test_cli_resumes_from_its_checkpoint_or_a_given_record(
    dsn: str, tenant: Tenant, contact: dict[str, Any], admin: Admin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mails.jsonl"
    path.write_text("\n".join(json.dumps(item(contact["id"], n, "2023-01-01T00:00:00Z")) for n in range(1, 31)) + "\n")
    t = ("--tenant", tenant.slug, "--agent", "luna")
    real = backfill.import_interactions

    def flaky(claims: Any, items: Any) -> Any:
        if items[0]["external_id"] == "mail-11":  # the second batch (records 11-20)
            raise CortexError(503, "database_unavailable", "the database is not reachable")
        return real(claims, items)

    monkeypatch.setattr(backfill, "import_interactions", flaky)
    cortex(*t, "import", str(path), "--batch-size", "10", "--parallel", "1", code=1)
    checkpoint = json.loads((tmp_path / "mails.jsonl.cortex-import").read_text())
    assert checkpoint["next_record"] == 11
    assert count(admin, "cortex.interactions") == 10
    monkeypatch.setattr(backfill, "import_interactions", real)
    resumed = json.loads(cortex("--json", *t, "import", str(path), "--batch-size", "10").stdout)
    assert (resumed["resumed_from"], resumed["received"], resumed["inserted"]) == (11, 20, 20)
    assert count(admin, "cortex.interactions") == 30
    # --resume-from skips records by number; what is there already is a duplicate anyway.
    partial = json.loads(cortex("--json", *t, "import", str(path), "--resume-from", "26").stdout)
    assert (partial["received"], partial["duplicates"]) == (5, 5)


def test_cli_in_parallel_checkpoints_only_what_is_stored_in_file_order(
    dsn: str, tenant: Tenant, contact: dict[str, Any], admin: Admin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mails.jsonl"
    path.write_text("\n".join(json.dumps(item(contact["id"], n, "2023-01-01T00:00:00Z")) for n in range(1, 41)) + "\n")
    t = ("--tenant", tenant.slug, "--agent", "luna")
    real = backfill.import_interactions

    def flaky(claims: Any, items: Any) -> Any:
        if items[0]["external_id"] == "mail-11":
            raise CortexError(503, "database_unavailable", "the database is not reachable")
        return real(claims, items)

    monkeypatch.setattr(backfill, "import_interactions", flaky)
    cortex(*t, "import", str(path), "--batch-size", "10", "--parallel", "2", code=1)
    # Batch 3 (records 21-30) was in flight beside the failed batch 2 and is stored, but the
    # checkpoint stays before batch 2: a resume sends batch 3 again, as duplicates.
    assert json.loads((tmp_path / "mails.jsonl.cortex-import").read_text())["next_record"] == 11
    assert count(admin, "cortex.interactions") == 20
    monkeypatch.setattr(backfill, "import_interactions", real)
    resumed = json.loads(cortex("--json", *t, "import", str(path), "--batch-size", "10", "--parallel", "3").stdout)
    assert (resumed["resumed_from"], resumed["received"], resumed["inserted"], resumed["duplicates"]) == (
        11, 30, 20, 10,
    )  # fmt: skip
    assert count(admin, "cortex.interactions") == 40
