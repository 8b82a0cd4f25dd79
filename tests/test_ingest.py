"""File ingest (issue 8): chunking per format, classification (heuristics in SQL, or the model),
de-duplication, idempotency, bad files (nothing written), the drop folder, HTTP and the CLI."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from cortex import db
from cortex.cli import main
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.ingest import chunking, jobs, service
from cortex.ingest.models import IngestFile, IngestFileList, IngestReport
from cortex.queue.worker import SWEEPS, load_handlers
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import FakeAnthropic

Admin = psycopg.Connection[dict[str, Any]]

MEMORY_MD = b"""# Luna's memory

## Decisions
- We decided to ship the cups by sea freight from now on.
- Chose Stripe over PayPal for the new checkout.

## Preferences
- John Smith prefers email over phone calls.

## Lessons
Always confirm the delivery address before an order ships.

## 2024-03-01 warehouse move
The stock moved to the Rotterdam warehouse.

## Office
The office is in Utrecht, above the bakery.
"""


def _claims(tenant: Tenant, agent: str = "luna") -> dict[str, str]:
    return db.agent_claims(tenant.id, agent)


def _ingest(tenant: Tenant, name: str, data: bytes, agent: str = "luna", **kw: Any) -> dict[str, Any]:
    return service.ingest_bytes(_claims(tenant, agent), name, data, **kw)


def _memories(admin: Admin, tenant: Tenant) -> list[dict[str, Any]]:
    return admin.execute(
        "select id, kind, title, body, source_agent, metadata from cortex.memory_nodes"
        " where tenant_id = %s and ref_kind is null order by created_at",
        (tenant.id,),
    ).fetchall()


def _kinds(report: dict[str, Any]) -> dict[str, str]:
    return {n["title"]: n["kind"] for n in report["nodes"]}


def _files(admin: Admin, tenant: Tenant) -> list[dict[str, Any]]:
    return admin.execute(
        "select * from cortex.ingest_files where tenant_id = %s order by created_at", (tenant.id,)
    ).fetchall()


# --- classification (one SQL function) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("We decided to use Go for Dispatch", "decision"),
        ("Kai chose Postgres", "decision"),
        ("Our goal is 100 customers", "goal"),
        ("The aim: fewer refunds", "goal"),
        ("Mike prefers short answers", "preference"),
        ("Anna hates meetings before nine", "preference"),
        ("Lesson: retries need a budget", "pattern"),
        ("Always run the tests first", "pattern"),
        ("Never promise a delivery date", "pattern"),  # AGENTS.md's rules and conventions
        ("Rules\nRefunds above 500 EUR need approval", "pattern"),
        ("v2 deployed to production", "event"),
        ("PR 12 merged", "event"),
        ("We noticed the queue grows on Mondays", "observation"),
        ("I saw that the cache was cold", "observation"),
        ("Invoice sent on 2024-03-01", "event"),
        ("Meeting on 3/14/2024", "event"),
        ("Contract renews March 3rd", "event"),
        ("Due 12 December", "event"),
        ("Dispatch is I/O-bound", "fact"),
        ("The claim was filed", "fact"),  # "aim" inside "claim" is no goal: whole words only
        ("On 2024-05-01 we decided to move", "decision"),  # keywords before the date rule
    ],
)
def test_classify_chunk_applies_the_seed_keywords_then_the_date_rule(admin: Admin, text: str, kind: str) -> None:
    row = admin.execute("select cortex.classify_chunk(%s) as k", (text,)).fetchone()
    assert row is not None and row["k"] == kind


# --- formats ----------------------------------------------------------------------------------------


def test_markdown_is_split_by_heading_with_bullets_one_by_one_and_classified(admin: Admin, tenant: Tenant) -> None:
    report = _ingest(tenant, "MEMORY.md", MEMORY_MD)
    assert report["status"] == "processed" and report["format"] == "md"
    assert report["chunks"] == 6 and report["created"] == 6 and report["duplicates"] == 0
    assert _kinds(report) == {
        "We decided to ship the cups by sea freight from now on.": "decision",
        "Chose Stripe over PayPal for the new checkout.": "decision",
        "John Smith prefers email over phone calls.": "preference",
        "Lessons": "pattern",
        "2024-03-01 warehouse move": "event",
        "Office": "fact",
    }
    stored = {m["title"]: m for m in _memories(admin, tenant)}
    assert stored["Office"]["body"] == "The office is in Utrecht, above the bakery."
    assert stored["Office"]["source_agent"] == "luna"
    meta = stored["John Smith prefers email over phone calls."]["metadata"]["ingest"]
    assert meta["section"] == "Luna's memory > Preferences" and meta["file_name"] == "MEMORY.md"
    assert meta["classified_by"] == "heuristic"
    # Each chunk applies to the agent it was ingested for.
    applies = admin.execute(
        """select count(*) as n from cortex.memory_edges e join cortex.memory_nodes a
             on a.tenant_id = e.tenant_id and a.id = e.target_id
           where e.tenant_id = %s and e.relation = 'applies_to' and a.ref_kind = 'agent' and a.ref_id = 'luna'""",
        (tenant.id,),
    ).fetchone()
    assert applies is not None and applies["n"] == 6
    logged = _files(admin, tenant)
    assert [(f["file_name"], f["status"], f["source"], f["agent"]) for f in logged] == [
        ("MEMORY.md", "processed", "api", "luna")
    ]
    assert logged[0]["sha256"] == chunking.sha256_hex(MEMORY_MD) and logged[0]["finished_at"] is not None
    assert logged[0]["report"]["created"] == 6


def test_text_is_split_into_paragraphs_and_line_groups(tenant: Tenant) -> None:
    long_paragraph = "\n".join(f"line {i} of the runbook" for i in range(25))
    text = f"The VPN needs a restart weekly.\n\nWe picked Hetzner for hosting.\n\n{long_paragraph}\n".encode()
    report = _ingest(tenant, "notes.txt", text)
    titles = [n["title"] for n in report["nodes"]]
    assert titles == ["The VPN needs a restart weekly.", "We picked Hetzner for hosting.",
                      "line 0 of the runbook", "line 20 of the runbook"]  # fmt: skip
    assert _kinds(report)["We picked Hetzner for hosting."] == "decision"


def test_log_entries_are_chunks_and_dated_lines_are_events(tenant: Tenant) -> None:
    text = b"2024-05-01 10:00 api restarted\n  after the config change\n2024-05-02 09:00 v2.1 deployed\n"
    report = _ingest(tenant, "ops.log", text)
    assert report["chunks"] == 2
    assert {n["kind"] for n in report["nodes"]} == {"event"}
    chunks = chunking.chunk(chunking.read("ops.log", text))
    assert chunks[0].body == "2024-05-01 10:00 api restarted\nafter the config change" and chunks[0].line == 1


def test_csv_rows_are_chunks_and_a_kind_column_is_used(tenant: Tenant) -> None:
    text = (
        b"title,kind,notes\nRefund window is 30 days,fact,from the terms\n"
        b"Grow to 50 shops,goal,\nShip by DHL,decision,\n"
    )
    report = _ingest(tenant, "items.csv", text)
    assert _kinds(report) == {"Refund window is 30 days": "fact", "Grow to 50 shops": "goal", "Ship by DHL": "decision"}
    assert {n["classified_by"] for n in report["nodes"]} == {"file"}


def test_json_top_level_items_are_chunks(tenant: Tenant) -> None:
    data = json.dumps(
        [
            {"title": "Kai prefers terse status updates", "body": "One line per item."},
            {"name": "Dispatch", "description": "Written in Go", "owner": "dutybound"},
            {"title": "Q3 target", "kind": "goal", "body": "Ten enterprise customers"},
        ]
    ).encode()
    report = _ingest(tenant, "facts.json", data)
    assert _kinds(report) == {"Kai prefers terse status updates": "preference", "Dispatch": "fact", "Q3 target": "goal"}
    obj = json.dumps({"timezone": "Europe/Amsterdam", "escalation": {"title": "Escalate churn risks to Mia"}}).encode()
    report = _ingest(tenant, "settings.json", obj)
    assert [n["title"] for n in report["nodes"]] == ["timezone: Europe/Amsterdam", "Escalate churn risks to Mia"]


def test_yaml_top_level_items_are_chunks(tenant: Tenant) -> None:
    text = (
        b"rules:\n  - Never promise delivery dates\n  - Always cc the account manager\n"
        b"owner: luna\nlaunch: 2024-09-01\n"
    )
    report = _ingest(tenant, "agents.yaml", text)
    assert _kinds(report) == {"rules": "pattern", "owner: luna": "fact", "launch: 2024-09-01": "event"}
    assert report["format"] == "yaml"


# --- de-duplication and idempotency -------------------------------------------------------------------


def test_duplicates_of_existing_memories_are_counted_and_not_re_created(
    admin: Admin, tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "mia") as conn:
        existing = db.call(
            conn, "remember", kind="fact", title="Office", body="The office is in Utrecht, above the bakery."
        )
    report = _ingest(tenant, "MEMORY.md", MEMORY_MD)
    assert report["created"] == 5 and report["duplicates"] == 1
    dup = next(n for n in report["nodes"] if n["title"] == "Office")
    assert dup["created"] is False and dup["deduplicated"] == "exact" and dup["id"] == existing["memory"]["id"]
    assert [m["title"] for m in _memories(admin, tenant)].count("Office") == 1
    assert len(_memories(admin, tenant)) == 6


def test_the_same_file_twice_is_a_no_op(admin: Admin, tenant: Tenant) -> None:
    first = _ingest(tenant, "MEMORY.md", MEMORY_MD)
    before = len(_memories(admin, tenant))
    version = admin.execute("select cortex.graph_version(%s) as v", (tenant.id,)).fetchone()
    again = _ingest(tenant, "renamed.md", MEMORY_MD)
    assert again["already_ingested"] is True and again["file_id"] == first["file_id"] and again["created"] == 6
    assert len(_memories(admin, tenant)) == before
    assert admin.execute("select cortex.graph_version(%s) as v", (tenant.id,)).fetchone() == version
    assert [f["status"] for f in _files(admin, tenant)] == ["processed"]
    # Another agent's copy is that agent's file: its chunks duplicate the first ones.
    other = _ingest(tenant, "MEMORY.md", MEMORY_MD, agent="mia")
    assert other["already_ingested"] is False and other["created"] == 0 and other["duplicates"] == 6


# --- bad files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "status", "words"),
    [
        ("photo.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 422, "looks binary"),
        ("latin.txt", "caf\u00e9 au lait".encode("latin-1"), 422, "not valid UTF-8"),
        ("huge.txt", b"a" * (chunking.MAX_FILE_BYTES + 1), 413, "at most 1048576 bytes"),
        ("report.pdf", b"%PDF-1.4 text", 415, "unsupported file type '.pdf'"),
        ("empty.md", b"  \n\n", 422, "is empty"),
        ("broken.json", b'{"a": ', 422, "not valid JSON"),
        ("broken.yaml", b"a: [1, 2\nb: }", 422, "not valid YAML"),
    ],
)
def test_a_bad_file_gets_a_clear_error_naming_it_and_nothing_is_written(
    admin: Admin, tenant: Tenant, name: str, data: bytes, status: int, words: str
) -> None:
    with pytest.raises(service.IngestRejected) as caught:
        _ingest(tenant, name, data)
    assert caught.value.status == status
    assert caught.value.message.startswith(f"{name}: ") and words in caught.value.message
    assert _memories(admin, tenant) == []
    (logged,) = _files(admin, tenant)
    assert logged["status"] == "failed" and logged["file_name"] == name
    assert logged["report"]["created"] == 0 and words in logged["report"]["errors"][0]["message"]
    assert caught.value.details["report"]["file_id"] == str(logged["id"])


def test_a_bad_chunk_fails_the_whole_file_in_sql(admin: Admin, tenant: Tenant, as_agent: AsAgent) -> None:
    good = {"title": "A good chunk", "body": "fine"}
    for chunks, field in (
        ([good, {"title": "x" * 501}], "chunks[1].title"),
        ([good, {"title": "t", "kind": "rumour"}], "chunks[1].kind"),
        ([good, {"title": "t", "colour": "red"}], "chunks[1].colour"),
        ([good, {"title": "  "}], "chunks[1].title"),
        ([], "chunks"),
    ):
        with pytest.raises(CortexError) as caught, as_agent(tenant, "luna") as conn:
            db.call(conn, "ingest_chunks", file_name="a.md", format="md", chunks=psycopg.types.json.Jsonb(chunks))
        assert (caught.value.status, caught.value.field) == (422, field)
    with pytest.raises(CortexError) as caught, as_agent(tenant, "luna") as conn:
        db.call(conn, "ingest_chunks", file_name="a.pdf", format="pdf", chunks=psycopg.types.json.Jsonb([good]))
    assert caught.value.field == "format"
    assert _memories(admin, tenant) == [] and _files(admin, tenant) == []


def test_a_read_only_agent_cannot_ingest_and_an_admin_ingests_for_another(admin: Admin, tenant: Tenant) -> None:
    with pytest.raises(CortexError) as caught:
        _ingest(tenant, "MEMORY.md", MEMORY_MD, agent="helios")
    assert caught.value.status == 403 and _memories(admin, tenant) == []
    report = service.ingest_bytes(_claims(tenant, "system"), "MEMORY.md", MEMORY_MD, agent="mia")
    assert report["agent"] == "mia" and {m["source_agent"] for m in _memories(admin, tenant)} == {"mia"}
    with pytest.raises(CortexError) as caught:
        service.ingest_bytes(_claims(tenant, "luna"), "other.md", b"# x\n\nText", agent="mia")
    assert caught.value.status == 403 and caught.value.field == "agent"


# --- the drop folder ------------------------------------------------------------------------------------


def test_the_drop_folder_moves_files_to_processed_and_failed_with_reports(
    admin: Admin, tenant: Tenant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ingest"
    (root / tenant.slug / "luna").mkdir(parents=True)
    (root / tenant.slug / "luna" / "MEMORY.md").write_bytes(MEMORY_MD)
    (root / tenant.slug / "luna" / "photo.md").write_bytes(b"\x00\x01binary")
    (root / tenant.slug / "luna" / "upload.md.part").write_bytes(b"# half written")
    (root / "stray.md").write_bytes(b"# no tenant folder")
    (root / tenant.slug / "nobody").mkdir()
    (root / tenant.slug / "nobody" / "x.md").write_bytes(b"# for an unknown agent\n\ntext")

    reports = jobs.sweep_folder(root, settle_seconds=0)
    assert len(reports) == 4
    done = root / "processed" / tenant.slug / "luna" / "MEMORY.md"
    assert done.read_bytes() == MEMORY_MD and not (root / tenant.slug / "luna" / "MEMORY.md").exists()
    report = json.loads(done.with_name("MEMORY.md.report.json").read_text())
    assert report["status"] == "processed" and report["created"] == 6 and report["moved_to"] == str(done)
    bad = root / "failed" / tenant.slug / "luna" / "photo.md"
    assert bad.exists()
    bad_report = json.loads(bad.with_name("photo.md.report.json").read_text())
    assert bad_report["status"] == "failed" and "photo.md: looks binary" in bad_report["errors"][0]["message"]
    stray = json.loads((root / "failed" / "stray.md.report.json").read_text())
    assert "ingest/<tenant>/<agent>/" in stray["errors"][0]["message"]
    nobody = json.loads((root / "failed" / tenant.slug / "nobody" / "x.md.report.json").read_text())
    assert "nobody" in nobody["errors"][0]["message"]
    assert (root / tenant.slug / "luna" / "upload.md.part").exists()  # still being written: left alone
    assert len(_memories(admin, tenant)) == 6
    assert sorted((f["file_name"], f["status"], f["source"]) for f in _files(admin, tenant)) == [
        ("MEMORY.md", "processed", "folder"), ("photo.md", "failed", "folder")]  # fmt: skip

    # The same file dropped again: processed (already ingested), under a free name.
    (root / tenant.slug / "luna" / "MEMORY.md").write_bytes(MEMORY_MD)
    monkeypatch.setenv("CORTEX_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    load_handlers()
    assert "ingest_folder" in SWEEPS
    # Freshly written files wait SETTLE_SECONDS; the registered sweep sees it once it settled.
    monkeypatch.setattr(jobs, "SETTLE_SECONDS", 0.0)
    with psycopg.connect(get_settings().database_url, autocommit=True) as conn:
        assert jobs.sweep_folder(root, conn=conn, settle_seconds=0)[0]["already_ingested"] is True
        assert SWEEPS["ingest_folder"](conn, "w1", None) == 0  # nothing left
    assert (root / "processed" / tenant.slug / "luna" / "MEMORY-1.md").exists()
    assert len(_memories(admin, tenant)) == 6


# --- HTTP -----------------------------------------------------------------------------------------------


def _auth(tenant: Tenant, agent: str = "luna") -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.keys[agent]}"}


def test_http_multipart_and_json_uploads(client: Any, admin: Admin, tenant: Tenant) -> None:
    r = client.post("/api/v1/ingest", headers=_auth(tenant), files={"file": ("MEMORY.md", MEMORY_MD, "text/markdown")})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["file_name"] == "MEMORY.md" and body["created"] == 6 and body["already_ingested"] is False
    again = client.post("/api/v1/ingest", headers=_auth(tenant), json={"file_name": "MEMORY.md",
                                                                        "content": MEMORY_MD.decode()})  # fmt: skip
    assert again.status_code == 200 and again.json()["already_ingested"] is True
    notes = "We decided to hire a second support agent.\n\nThe support inbox is support@acme.com.\n"
    r = client.post("/api/v1/ingest", headers=_auth(tenant), json={"file_name": "notes.txt", "content": notes})
    assert r.status_code == 201 and [n["kind"] for n in r.json()["nodes"]] == ["decision", "fact"]
    encoded = base64.b64encode(b"- a: 1\n- b: 2\n").decode()
    r = client.post("/api/v1/ingest", headers=_auth(tenant), json={"file_name": "x.yml", "content_base64": encoded})
    assert r.status_code == 201 and r.json()["format"] == "yaml"
    # The multipart form may name the agent (admins only) and override the file name.
    r = client.post("/api/v1/ingest", headers=_auth(tenant), files={"file": ("a.bin", b"Plain text", "text/plain")},
                    data={"file_name": "renamed.txt"})  # fmt: skip
    assert r.status_code == 201 and r.json()["file_name"] == "renamed.txt"

    listed = client.get("/api/v1/ingest?status=processed", headers=_auth(tenant)).json()["items"]
    assert [f["file_name"] for f in listed] == ["renamed.txt", "x.yml", "notes.txt", "MEMORY.md"]
    assert "nodes" not in listed[-1]["report"]
    one = client.get(f"/api/v1/ingest/{body['file_id']}", headers=_auth(tenant)).json()
    assert len(one["report"]["nodes"]) == 6 and one["source"] == "api"
    # The documented response models hold what the API returns.
    IngestReport.model_validate(body)
    IngestReport.model_validate(again.json())
    IngestFileList.model_validate({"items": listed})
    IngestFile.model_validate(one)
    missing = client.get("/api/v1/ingest/00000000-0000-0000-0000-000000000000", headers=_auth(tenant))
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "file_id"


def test_http_upload_errors_name_the_field_and_write_nothing(client: Any, admin: Admin, tenant: Tenant) -> None:
    h = _auth(tenant)

    def error(r: Any, status: int, field: str | None) -> dict[str, Any]:
        assert r.status_code == status, r.text
        err: dict[str, Any] = r.json()["error"]
        assert err.get("field") == field, err
        return err

    error(client.post("/api/v1/ingest", headers={**h, "Content-Type": "text/plain"}, content=b"hello"), 415, "body")
    err = error(client.post("/api/v1/ingest", headers=h, json={"file_name": "a.pdf", "content": "x"}), 415, "file_name")
    assert "a.pdf" in err["message"] and err["report"]["status"] == "failed"
    big = "a" * (chunking.MAX_FILE_BYTES + 10)
    error(client.post("/api/v1/ingest", headers=h, json={"file_name": "big.txt", "content": big}), 413, "file")
    binary = base64.b64encode(b"\x00\x01\x02").decode()
    err = error(
        client.post("/api/v1/ingest", headers=h, json={"file_name": "b.md", "content_base64": binary}), 422, "file"
    )
    assert "b.md: looks binary" in err["message"]
    error(client.post("/api/v1/ingest", headers=h, files={"file": ("l.txt", b"caf\xe9", "text/plain")}), 422, "file")
    error(client.post("/api/v1/ingest", headers=h, json={"file_name": "a.md"}), 422, "body")
    error(
        client.post("/api/v1/ingest", headers=h, json={"file_name": "a.md", "content": "x", "extra": 1}), 422, "extra"
    )
    error(client.post("/api/v1/ingest", headers=h, json={"file_name": "a.md", "content_base64": "@@"}), 422,
          "content_base64")  # fmt: skip
    error(client.post("/api/v1/ingest", headers=h, files={"other": ("a.md", b"x", "text/plain")}), 422, "file")
    error(client.post("/api/v1/ingest", headers=_auth(tenant, "helios"),
                      json={"file_name": "a.md", "content": "# x\n\ntext"}), 403, None)  # fmt: skip
    assert _memories(admin, tenant) == []
    assert {f["status"] for f in _files(admin, tenant)} == {"failed"}


# --- CLI ------------------------------------------------------------------------------------------------


def cortex(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.output}"
    return result


def test_cortex_ingest_files_and_folders(dsn: str, admin: Admin, tenant: Tenant, tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "MEMORY.md").write_bytes(MEMORY_MD)
    (tmp_path / "memory" / "ignored.bin").write_bytes(b"\x00")
    (tmp_path / "log.txt").write_text("We chose a four-day week.\n")
    out = cortex("--tenant", tenant.slug, "ingest", str(tmp_path / "memory"), str(tmp_path / "log.txt"),
                 "--agent", "luna").output  # fmt: skip
    assert "ingested   MEMORY.md: 6 chunks, 6 created, 0 duplicates" in out and "ingested   log.txt: 1 chunks" in out
    again = cortex("--tenant", tenant.slug, "--agent", "luna", "--json", "ingest", str(tmp_path / "log.txt"))
    assert json.loads(again.output)["files"][0]["already_ingested"] is True
    (tmp_path / "bad.md").write_bytes(b"\xff\xfe\x00")
    failed = cortex("--tenant", tenant.slug, "--agent", "luna", "ingest", str(tmp_path / "bad.md"), code=1)
    assert "failed     bad.md: bad.md:" in failed.output
    assert {m["source_agent"] for m in _memories(admin, tenant)} == {"luna"} and len(_memories(admin, tenant)) == 7
    assert {f["source"] for f in _files(admin, tenant)} == {"cli"}


# --- the model ----------------------------------------------------------------------------------------


def test_the_model_classifies_through_the_gateway_with_usage_recorded(
    admin: Admin, tenant: Tenant, claude: FakeAnthropic
) -> None:
    def reply(request: dict[str, Any]) -> str:
        return json.dumps({"kinds": [{"chunk": 0, "kind": "goal"}, {"chunk": 1, "kind": "Observation"},
                                     {"chunk": 9, "kind": "fact"}]})  # fmt: skip

    claude.reply = reply
    text = b"We want every reply within an hour.\n\nTickets spike after each release.\n\nThe inbox is shared.\n"
    report = _ingest(tenant, "notes.txt", text)
    assert len(claude.requests) == 1
    prompt = claude.requests[0]["messages"][0]["content"]
    assert "Chunk 0: We want every reply within an hour." in prompt and "Chunk 2" in prompt
    assert [(n["kind"], n["classified_by"]) for n in report["nodes"]] == [
        ("goal", "model"), ("observation", "model"), ("fact", "heuristic")]  # fmt: skip
    usage = admin.execute(
        "select agent, model, operation, input_tokens from cortex.token_usage where tenant_id = %s", (tenant.id,)
    ).fetchall()
    assert [(u["agent"], u["operation"], u["model"]) for u in usage] == [
        ("luna", "ingest_classify", get_settings().summary_model)]  # fmt: skip
    assert usage[0]["input_tokens"] > 0
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone()["n"] == 0
    # The same file again asks nothing.
    assert _ingest(tenant, "notes.txt", text)["already_ingested"] is True and len(claude.requests) == 1


def test_a_failing_or_over_budget_model_leaves_the_heuristics(
    admin: Admin, tenant: Tenant, claude: FakeAnthropic
) -> None:
    claude.reply = lambda request: "not json at all"
    report = _ingest(tenant, "a.txt", b"We decided on Fridays off.\n")
    assert [(n["kind"], n["classified_by"]) for n in report["nodes"]] == [("decision", "heuristic")]
    failed = admin.execute("select metadata from cortex.token_usage where operation = 'ingest_classify'").fetchall()
    assert len(failed) == 1 and "schema" in failed[0]["metadata"]["error"]
    admin.execute("update cortex.agent_config set daily_token_budget = 1 where tenant_id = %s and agent = 'luna'",
                  (tenant.id,))  # fmt: skip
    asked = len(claude.requests)
    report = _ingest(tenant, "b.txt", b"Mia likes tea.\n")
    assert len(claude.requests) == asked and report["nodes"][0]["kind"] == "preference"
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone()["n"] == 0
