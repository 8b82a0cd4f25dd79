"""supabase/ is what the Supabase CLI expects (`supabase link`, `db push`, `db reset`), and its
config.toml agrees with the migrations: the schemas that hold API functions are exposed (or private
on purpose), the extensions' schema is on the search path, the major version is the one we test
on, and seed.sql (generated from the demo) applies to a freshly migrated database and yields the
demo tenant."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest

from cortex import demo

ROOT = Path(__file__).resolve().parents[1]
SUPABASE = ROOT / "supabase"
Admin = psycopg.Connection[dict[str, Any]]

# Schemas whose functions API roles may execute but which PostgREST must not expose, and why.
PRIVATE = {
    "cortex": "tables and helpers behind RLS; agents reach them only through public's functions",
    "auth": "Supabase's own (auth.uid(), auth.jwt()); the local stand-in creates it",
}


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    """supabase/config.toml, parsed."""
    with (SUPABASE / "config.toml").open("rb") as fh:
        return tomllib.load(fh)


def seed_script() -> ModuleType:
    """scripts/seed_sql.py, imported from its path (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("seed_sql", ROOT / "scripts" / "seed_sql.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_config_has_what_supabase_init_writes(config: dict[str, Any]) -> None:
    assert isinstance(config.get("project_id"), str) and config["project_id"]
    for section in ("api", "db", "realtime", "auth"):
        assert isinstance(config.get(section), dict), f"[{section}] missing"
    assert config["db"]["migrations"]["enabled"] is True


def test_migration_files_are_named_as_the_cli_reads_them() -> None:
    # The CLI takes the version from `<digits>_<name>.sql` and applies them in version order.
    names = sorted(p.name for p in (SUPABASE / "migrations").glob("*.sql"))
    assert names
    versions = [re.fullmatch(r"([0-9]+)_(.+)\.sql", n) for n in names]
    assert all(versions), [n for n, v in zip(names, versions, strict=True) if not v]
    numbers = [int(v.group(1)) for v in versions if v]
    assert len(set(numbers)) == len(numbers), "two migrations share a version"


def test_schemas_with_api_functions_are_exposed_or_private(config: dict[str, Any], admin: Admin) -> None:
    rows = admin.execute(
        """select distinct n.nspname as schema from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where has_function_privilege('authenticated', p.oid, 'execute')
             and n.nspname not in ('pg_catalog', 'information_schema')
             and not exists (select from pg_depend d where d.classid = 'pg_proc'::regclass
                             and d.objid = p.oid and d.deptype = 'e')"""
    ).fetchall()
    granted = {r["schema"] for r in rows}
    exposed = set(config["api"]["schemas"])
    assert "public" in granted, "no API function granted to authenticated in public"
    undecided = granted - exposed - PRIVATE.keys()
    assert not undecided, f"schemas with functions granted to authenticated, neither exposed nor private: {undecided}"
    assert not exposed & PRIVATE.keys(), "a private schema is exposed through PostgREST"
    # Nothing exposed that the migrations do not fill with API (graphql_public included).
    assert exposed <= granted, f"exposed without any API function: {exposed - granted}"


def test_extra_search_path_has_the_extensions_schema(config: dict[str, Any], admin: Admin) -> None:
    rows = admin.execute(
        "select e.extname, n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace"
        " where n.nspname <> 'pg_catalog'"
    ).fetchall()
    schemas = {r["extname"]: r["nspname"] for r in rows}
    assert {"pgcrypto", "pg_trgm", "btree_gin", "btree_gist", "vector"} <= schemas.keys()
    path = config["api"]["extra_search_path"]
    assert "public" in path
    missing = {name: schema for name, schema in schemas.items() if schema not in path}
    assert not missing, f"extensions in schemas not on [api].extra_search_path: {missing}"
    assert "extensions" in path and "public" not in schemas.values()


def test_major_version_is_the_one_we_test_on(config: dict[str, Any], admin: Admin) -> None:
    assert config["db"]["major_version"] == 15
    row = admin.execute("select current_setting('server_version_num')::int / 10000 as major").fetchone()
    assert row is not None and row["major"] == config["db"]["major_version"]


def test_seed_is_enabled_and_its_paths_exist(config: dict[str, Any]) -> None:
    seed = config["db"]["seed"]
    assert seed["enabled"] is True
    assert seed["sql_paths"] == ["./seed.sql"]
    for path in seed["sql_paths"]:  # relative to supabase/, as the CLI reads them
        assert (SUPABASE / path).is_file(), path


def test_committed_seed_is_the_generated_one() -> None:
    text = (SUPABASE / "seed.sql").read_text()
    assert text == seed_script().render(), "supabase/seed.sql is stale: run .venv/bin/python scripts/seed_sql.py"
    # Only Cortex's functions write (plus the demo marker, which has no function): no raw rows, no keys.
    assert not re.search(r"\binsert\s+into\b|\bdelete\s+from\b", text, re.I)
    assert "create_agent_key" not in text and "ctx_" not in text


def _apply_seed(dsn: str) -> None:
    # As the CLI runs it: every statement in one transaction, on one connection, as the owner.
    with psycopg.connect(dsn) as conn:
        conn.execute((SUPABASE / "seed.sql").read_text().encode())


def _counts(admin: Admin) -> dict[str, Any]:
    row = admin.execute(
        """select t.id, t.name, t.time_zone, t.config -> 'demo' ->> 'version' as demo_version,
                  (select count(*) from cortex.contacts c where c.tenant_id = t.id) as contacts,
                  (select count(*) from cortex.interactions i where i.tenant_id = t.id) as interactions,
                  (select count(*) from cortex.jobs j where j.tenant_id = t.id) as jobs
           from cortex.tenants t where t.slug = %s""",
        (demo.TENANT_SLUG,),
    ).fetchone()
    assert row is not None, "no demo tenant"
    return row


def test_seed_applies_to_a_fresh_database_and_yields_the_demo(dsn: str, admin: Admin) -> None:
    _apply_seed(dsn)
    got = _counts(admin)
    people = demo.build_demo(datetime.now(UTC))
    assert (got["name"], got["time_zone"], got["demo_version"]) == (
        demo.TENANT_NAME,
        demo.TIME_ZONE,
        str(demo.DEMO_VERSION),
    )
    assert got["contacts"] == len(people) == 50
    assert got["interactions"] == sum(len(p.items) for p in people)

    agents = admin.execute(
        """select a.name, a.display_name, a.role, a.read_only, c.max_input_tokens, c.daily_token_budget
           from cortex.agents a join cortex.agent_config c using (tenant_id)
           where c.agent = a.name and a.tenant_id = %s and a.name <> 'system' order by a.name""",
        (got["id"],),
    ).fetchall()
    assert [tuple(a.values()) for a in agents] == sorted(demo.AGENTS)

    # The data are the demo's: contacts as built, each interaction with its story date, by its agent.
    first = people[0]
    contact = admin.execute(
        "select * from cortex.contacts where tenant_id = %s and email = %s", (got["id"], first.fields["email"])
    ).fetchone()
    assert contact is not None
    for name in ("name", "company_name", "stage", "owner_agent", "custom_fields"):
        assert contact[name] == first.fields[name], name
    assert sorted(contact["tags"]) == first.fields["tags"]
    logged = admin.execute(
        "select agent, type, subject, raw_content, external_id, metadata from cortex.interactions"
        " where contact_id = %s order by metadata ->> 'occurred_at', external_id",
        (contact["id"],),
    ).fetchall()
    assert [(r["agent"], r["type"], r["subject"], r["raw_content"], r["external_id"]) for r in logged] == [
        (i.agent, i.type, i.subject, i.content, i.external_id) for i in first.items
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d\+00:00", r["metadata"]["occurred_at"]) for r in logged)
    # Nothing summarised yet: the worker does it, and every contact's context is queued.
    jobs = {
        r["kind"]: r["n"]
        for r in admin.execute(
            "select kind, count(*) as n from cortex.jobs where tenant_id = %s group by kind", (got["id"],)
        )
    }
    assert jobs == {"summarise_interaction": got["interactions"], "generate_context": got["contacts"]}
    # No keys: operators mint them.
    keys = admin.execute("select count(*) as n from cortex.agent_keys where tenant_id = %s", (got["id"],)).fetchone()
    assert keys is not None and keys["n"] == 0


def test_seed_runs_twice_without_change(dsn: str, admin: Admin) -> None:
    _apply_seed(dsn)
    before = _counts(admin)
    _apply_seed(dsn)
    assert _counts(admin) == before
