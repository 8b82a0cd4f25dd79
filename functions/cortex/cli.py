"""The `cortex` command line: operators run Cortex and act on a tenant as one of its agents.

Tenant and agent are resolved once (as the database owner); every data command then goes through
the same service modules and SQL functions as the HTTP API, with the claims of that agent, so
every rule of the SQL functions (validation, read-only agents, RLS) applies to operators too.

Exit codes: 0 ok, 1 error (the database or Cortex said no), 2 bad arguments.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import click
import psycopg
from psycopg.rows import dict_row

from cortex import contacts as contacts_svc
from cortex import db
from cortex.config import get_settings
from cortex.demo import DEFAULT_KEYS_FILE, load_demo, use_database
from cortex.errors import CortexError, from_db_error
from cortex.migrate import migrate as run_migrations

FUNCTIONS_DIR = Path(__file__).resolve().parents[1]
_CONNECT_TIMEOUT = 5


# --- state, output and errors --------------------------------------------------------------------


@dataclass
class State:
    """What the global options decided, shared by every command."""

    as_json: bool
    tenant: str | None
    agent: str
    database_url: str
    _tenant_id: str | None = None

    def connect(self) -> psycopg.Connection[dict[str, Any]]:
        """An owner connection (autocommit) for operator actions that are not agent API calls."""
        return psycopg.connect(
            self.database_url, autocommit=True, row_factory=dict_row, connect_timeout=_CONNECT_TIMEOUT
        )

    def tenant_id(self) -> str:
        """The id of --tenant (slug or UUID); with no --tenant, the only tenant if there is one."""
        if self._tenant_id is None:
            with self.connect() as conn:
                self._tenant_id = _resolve_tenant(conn, self.tenant)
        return self._tenant_id

    def claims(self) -> dict[str, str]:
        """The claims of --agent in --tenant (the agent must exist there), as an API request carries."""
        tid = self.tenant_id()
        with self.connect() as conn:
            names = [r["name"] for r in conn.execute(
                "select name from cortex.agents where tenant_id = %s order by name", (tid,))]  # fmt: skip
        if self.agent not in names:
            raise CortexError(404, "unknown_agent", f'unknown agent "{self.agent}" in tenant {self.tenant or tid}',
                              "agent", f"agents of this tenant: {', '.join(names)}; "
                                       "create one with `cortex agents create NAME`")  # fmt: skip
        return db.agent_claims(tid, self.agent)


def _resolve_tenant(conn: psycopg.Connection[dict[str, Any]], ref: str | None) -> str:
    if ref:
        try:
            as_uuid: uuid.UUID | None = uuid.UUID(ref)
        except ValueError:
            as_uuid = None
        row = conn.execute("select id from cortex.tenants where id = %s or slug = %s", (as_uuid, ref)).fetchone()
        if row is not None:
            return str(row["id"])
    tenants = conn.execute("select id, slug from cortex.tenants order by slug limit 21").fetchall()
    if not ref and len(tenants) == 1:
        # One tenant (the usual development set-up): no need to name it every time.
        return str(tenants[0]["id"])
    slugs = ", ".join(t["slug"] for t in tenants[:20]) + (", ..." if len(tenants) > 20 else "")
    known = f"known tenants: {slugs}" if tenants else "there are no tenants yet"
    hint = f"{known}; create one with `cortex tenants create NAME SLUG` (or load `cortex demo`)"
    if not ref:
        raise CortexError(400, "tenant_required", "no tenant given: use --tenant SLUG or set CORTEX_TENANT",
                          "tenant", hint)  # fmt: skip
    raise CortexError(404, "unknown_tenant", f'unknown tenant "{ref}"', "tenant", hint)


def _state() -> State:
    state = click.get_current_context().find_object(State)
    assert state is not None, "commands run under the main group, which creates the state"
    return state


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, default=str, ensure_ascii=False)


def emit(data: Any, human: Callable[[], None] | str) -> None:
    """Prints `data` as JSON with --json, else the human rendering (text or a callable printing it)."""
    if _state().as_json:
        click.echo(_dump(data))
    elif isinstance(human, str):
        click.echo(human)
    else:
        human()


def _report(exc: CortexError, as_json: bool) -> None:
    if as_json:
        click.echo(_dump(exc.to_json()))
    extra = ", ".join(f"{k}: {v}" for k, v in (("field", exc.field), ("sqlstate", exc.sqlstate)) if v)
    click.echo(f"error: {exc.message}" + (f" ({extra})" if extra else ""), err=True)
    detail = exc.details.get("detail")
    if detail:
        click.echo(f"detail: {detail}", err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)


def _operator_db_error(exc: psycopg.Error) -> CortexError:
    # Operators are trusted: unlike the HTTP edge, show what the database said even for 5xx errors.
    mapped = from_db_error(exc)
    if mapped.status < 500:
        return mapped
    message = (exc.diag.message_primary if exc.sqlstate else None) or str(exc).strip() or type(exc).__name__
    return CortexError(500, "database_error", message, sqlstate=exc.sqlstate)


class _CortexGroup(click.Group):
    """Turns CortexError and database errors into `error: ...` on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CortexError as exc:
            _report(exc, _as_json(ctx))
        except psycopg.Error as exc:
            _report(_operator_db_error(exc), _as_json(ctx))
        ctx.exit(1)


def _as_json(ctx: click.Context) -> bool:
    state = ctx.find_object(State)
    return bool(state and state.as_json)


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], width: int = 44) -> str:
    """A plain text table: columns are (key, heading); long cells are cut to `width`, ids never
    (people copy them into the next command)."""

    def cell(key: str, value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        text = " ".join(str(value).split())
        return text if len(text) <= width or key in ("id", "prefix") else text[: width - 1] + "…"

    cells = [[cell(key, r.get(key)) for key, _ in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_, h) in enumerate(columns)]
    lines = ["  ".join(h.upper().ljust(w) for (_, h), w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def _when(value: Any) -> str:
    # ISO timestamps shortened to the minute for people; JSON output keeps them exact.
    return str(value)[:16].replace("T", " ") if value else "-"


# --- argument parsing helpers --------------------------------------------------------------------


def _key_values(pairs: Sequence[str], option: str) -> dict[str, Any]:
    """k=v pairs as a dict: `k=v` is a string, `k:=<json>` a JSON value (numbers, lists, objects)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.rstrip(":"):
            raise click.BadParameter(f"expected key=value or key:=json, got {pair!r}", param_hint=option)
        if key.endswith(":"):
            key = key[:-1]
            try:
                out[key] = json.loads(value)
            except json.JSONDecodeError as exc:
                raise click.BadParameter(f"{key}: not valid JSON ({exc.msg})", param_hint=option) from exc
        else:
            out[key] = value
    return out


def _json_object(value: str | None, option: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON ({exc.msg})", param_hint=option) from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint=option)
    return parsed


def _timestamp(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"not an ISO 8601 timestamp: {value!r}", param_hint="--since") from exc


# --- the command group ---------------------------------------------------------------------------


@click.group(cls=_CortexGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Machine output: JSON on stdout.")
@click.option("--tenant", envvar="CORTEX_TENANT", help="Tenant slug or UUID (default: the only tenant).")
@click.option(
    "--agent",
    envvar="CORTEX_AGENT",
    default="system",
    show_default=True,
    help="The agent to act as (its rules apply, e.g. read-only).",
)
@click.option("--database-url", envvar="DATABASE_URL", help="PostgreSQL URL (default: settings).")
@click.pass_context
def main(ctx: click.Context, as_json: bool, tenant: str | None, agent: str, database_url: str | None) -> None:
    """Cortex: shared memory for teams of AI agents."""
    url = database_url or get_settings().database_url
    use_database(url)
    ctx.obj = State(as_json, tenant, agent, url)
    # A command line is one short process: give the pool back before exit.
    ctx.call_on_close(db.close_pool)


# --- running Cortex ------------------------------------------------------------------------------


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
def serve(host: str, port: int) -> None:
    """Serve the HTTP API (functions-framework, target `api`)."""
    exe = Path(sys.executable).with_name("functions-framework")
    program = str(exe) if exe.exists() else shutil.which("functions-framework")
    if program is None:
        raise CortexError(
            500,
            "not_installed",
            "functions-framework is not installed",
            hint="run scripts/setup (installs the venv)",
        )
    # The server inherits DATABASE_URL, which the main group has set from --database-url.
    args = [program, "--source", str(FUNCTIONS_DIR / "main.py"), "--target", "api"]
    # functions-framework runs one gunicorn process (one GIL) unless told otherwise: use every core.
    os.environ.setdefault("WORKERS", str(os.cpu_count() or 1))
    sys.stdout.flush()
    os.execv(program, [*args, "--host", host, "--port", str(port)])


@main.command()
@click.option("--once", is_flag=True, help="Run the jobs due now, then exit.")
@click.option("--batch", type=click.IntRange(1, 1000), default=10, show_default=True, help="Jobs claimed at a time.")
@click.option("--worker-id", help="Name in cortex.jobs.locked_by (default hostname:pid).")
def worker(once: bool, batch: int, worker_id: str | None) -> None:
    """Run the background worker (summaries, context generation, webhook delivery) until SIGTERM/SIGINT."""
    import threading

    from cortex import webhooks
    from cortex import worker as worker_mod  # imported late: the other commands need none of it

    logging.basicConfig(
        level=os.environ.get("CORTEX_LOG_LEVEL", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Webhook delivery runs beside the job loop; SIGTERM sets the shared stop event for both.
    stop = threading.Event()
    delivery = webhooks.start_in_background(stop, f"webhooks@{worker_id}" if worker_id else None, once=once)
    try:
        ran = worker_mod.run(worker_id, once=once, batch=batch, stop=stop)
        if once:
            delivery.join()  # --once: deliver what is due too, then exit
    finally:
        stop.set()
        delivery.join(timeout=30)
    emit({"jobs_run": ran}, f"worker ran {ran} job(s)")


@main.command()
def migrate() -> None:
    """Apply pending migrations (and the local Supabase platform stand-in)."""
    done = run_migrations(_state().database_url)
    emit(
        {"applied": done},
        f"applied {len(done)} migration(s): {', '.join(done)}" if done else "database is up to date",
    )


@main.command()
@click.option("--reset", is_flag=True, help="Delete the demo tenant first and load it afresh.")
@click.option(
    "--keys-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="CORTEX_DEMO_KEYS_FILE",
    default=DEFAULT_KEYS_FILE,
    show_default=True,
    help="Where the demo agents' keys are kept.",
)
def demo(reset: bool, keys_file: Path) -> None:
    """Load the Top Cup demo data set (idempotent)."""
    info = load_demo(_state().database_url, reset=reset, keys_file=keys_file)

    def human() -> None:
        verb = "loaded" if info.loaded else "already loaded"
        click.echo(
            f"demo tenant top-cup ({info.tenant_id}) {verb}: {info.contacts} contacts, "
            f"{info.interactions} interactions, {info.queued_jobs} job(s) queued for the worker"
        )
        for agent, key in info.keys.items():
            click.echo(f"  {agent:<7} {key}")
        click.echo(f"keys kept in {keys_file}")

    emit(asdict(info), human)


# --- tenants, agents, keys (owner operations) ----------------------------------------------------


@main.group()
def tenants() -> None:
    """Create and list tenants."""


@tenants.command("create")
@click.argument("name")
@click.argument("slug")
@click.option("--time-zone", default="UTC", show_default=True, help="IANA name, e.g. Europe/Berlin.")
def tenants_create(name: str, slug: str, time_zone: str) -> None:
    """Create a tenant (with its `system` agent and default model prices)."""
    with _state().connect() as conn:
        row = conn.execute("select cortex.create_tenant(%s, %s, %s) as id", (name, slug, time_zone)).fetchone()
    assert row is not None
    emit(
        {"id": str(row["id"]), "name": name, "slug": slug, "time_zone": time_zone},
        f"created tenant {slug} ({row['id']})",
    )


@tenants.command("list")
def tenants_list() -> None:
    """List tenants."""
    with _state().connect() as conn:
        rows = conn.execute(
            "select t.id::text, t.name, t.slug, t.time_zone, t.created_at,"
            " (select count(*) from cortex.contacts c where c.tenant_id = t.id) as contacts"
            " from cortex.tenants t order by t.slug"
        ).fetchall()
    emit(
        rows,
        lambda: click.echo(
            _table(
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


@main.group()
def agents() -> None:
    """Create and list the agents of a tenant."""


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
    state = _state()
    tid = state.tenant_id()
    args = {
        "p_tenant_id": tid,
        "p_name": name,
        "p_display_name": display_name,
        "p_role": role,
        "p_read_only": read_only,
        "p_max_input_tokens": max_input_tokens,
        "p_daily_token_budget": daily_budget,
    }
    present = {k: v for k, v in args.items() if v is not None}
    sql = "select cortex.create_agent(" + ", ".join(f"{k} => %({k})s" for k in present) + ")"
    with state.connect() as conn:
        conn.execute(sql, present)
        row = conn.execute(
            "select a.name, a.display_name, a.role, a.read_only, c.max_input_tokens, c.daily_token_budget"
            " from cortex.agents a join cortex.agent_config c using (tenant_id)"
            " where a.tenant_id = %s and a.name = %s and c.agent = a.name",
            (tid, name),
        ).fetchone()
    assert row is not None
    emit(
        row,
        f"agent {name}: role {row['role']}, read-only {'yes' if row['read_only'] else 'no'}, "
        f"max input {row['max_input_tokens']} tokens, daily budget {row['daily_token_budget']} tokens",
    )


@agents.command("list")
def agents_list() -> None:
    """List the tenant's agents and their budgets."""
    state = _state()
    with state.connect() as conn:
        rows = conn.execute(
            "select a.name, a.display_name, a.role, a.read_only, a.enabled, c.max_input_tokens,"
            " c.daily_token_budget from cortex.agents a left join cortex.agent_config c"
            " on c.tenant_id = a.tenant_id and c.agent = a.name where a.tenant_id = %s order by a.name",
            (state.tenant_id(),),
        ).fetchall()
    emit(
        rows,
        lambda: click.echo(
            _table(
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


@main.group()
def keys() -> None:
    """Manage agents' API keys (stored hashed: a key is shown once)."""


@keys.command("create")
@click.argument("agent")
@click.option("--label", help="What the key is for.")
def keys_create(agent: str, label: str | None) -> None:
    """Create an API key for AGENT and print it (once)."""
    state = _state()
    with state.connect() as conn:
        row = conn.execute(
            "select cortex.create_agent_key(%s, %s, %s) as key", (state.tenant_id(), agent, label)
        ).fetchone()
    assert row is not None
    key: str = row["key"]
    emit(
        {"agent": agent, "label": label, "prefix": key.split("_")[1], "key": key},
        f"{key}\n(key for {agent}; shown only now, store it safely)",
    )


@keys.command("revoke")
@click.argument("prefix")
def keys_revoke(prefix: str) -> None:
    """Revoke the key with PREFIX (the part after `ctx_`; a whole key works too)."""
    state = _state()
    if prefix.startswith("ctx_"):
        prefix = prefix.split("_")[1]
    with state.connect() as conn:
        # Only keys of this tenant: the prefix alone would reach any tenant's key.
        row = conn.execute(
            "select agent, revoked_at from cortex.agent_keys where tenant_id = %s and prefix = %s",
            (state.tenant_id(), prefix),
        ).fetchone()
        if row is None:
            raise CortexError(
                404,
                "not_found",
                f"no key with prefix {prefix} in this tenant",
                "prefix",
                "see `cortex keys list`",
            )
        if row["revoked_at"] is not None:
            raise CortexError(
                409, "already_revoked", f"key {prefix} was already revoked at {row['revoked_at']}", "prefix"
            )
        conn.execute("select cortex.revoke_agent_key(%s)", (prefix,))
    emit({"prefix": prefix, "agent": row["agent"], "revoked": True}, f"revoked key {prefix} of {row['agent']}")


@keys.command("list")
def keys_list() -> None:
    """List the tenant's keys (prefixes only; keys themselves are not stored)."""
    state = _state()
    with state.connect() as conn:
        rows = conn.execute(
            "select prefix, agent, label, created_at, last_used_at, revoked_at from cortex.agent_keys"
            " where tenant_id = %s order by agent, created_at",
            (state.tenant_id(),),
        ).fetchall()

    def human() -> None:
        shown = [
            {
                **r,
                "created_at": _when(r["created_at"]),
                "last_used_at": _when(r["last_used_at"]),
                "revoked_at": _when(r["revoked_at"]),
            }
            for r in rows
        ]
        click.echo(
            _table(
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


# --- contacts ------------------------------------------------------------------------------------


def _contact_text(c: Mapping[str, Any]) -> str:
    title = c.get("name") or c["email"]
    lines = [f"{title} <{c['email']}>  [{c['stage']}]" + ("  (created)" if c.get("created") else "")]
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
            f"{c.get('interaction_count', 0)} (first {_when(c.get('first_touch_at'))}, last "
            f"{_when(c.get('last_touch_at'))}"
            + (f" by {c['last_touch_agent']})" if c.get("last_touch_agent") else ")"),
        ),
        ("customer", _when(c["converted_at"]) if c.get("converted_at") else None),
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


@main.group()
def contacts() -> None:
    """Contacts: upsert, get, update, search."""


@contacts.command("upsert")
@click.option("--email", required=True, help="Email (the contact's identity in the tenant).")
@click.option("--name")
@click.option("--company-name")
@click.option("--phone")
@click.option("--stage", help="prospect, qualified, opportunity, customer, churning, lost or recovered.")
@click.option("--source", help="How they came in, e.g. anna_outbound, inbound_form, referral.")
@click.option("--owner-agent")
@click.option("--owner-human-id")
@click.option("--tag", "tags", multiple=True, help="Repeatable; tags accumulate.")
@click.option("--custom-field", "custom", multiple=True, help="k=v or k:=json; repeatable; fields merge.")
def contacts_upsert(
    email: str,
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
    """Create or update the contact with this email (upsert_contact)."""
    custom_fields = _key_values(custom, "--custom-field") if custom else None
    result = contacts_svc.upsert_contact(
        _state().claims(),
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
    result = contacts_svc.get_contact(_state().claims(), str(contact_id))
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
    patch = _key_values(sets, "--set")
    if isinstance(patch.get("tags"), str):
        patch["tags"] = [t.strip() for t in patch["tags"].split(",") if t.strip()]
    patch.update(dict.fromkeys(clears))
    result = contacts_svc.update_contact(_state().claims(), str(contact_id), patch)
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
        _state().claims(),
        stage=stage,
        owner_agent=owner_agent,
        owner_human_id=owner_human_id,
        tag=tag,
        search=search,
        limit=limit,
        offset=offset,
    )

    def human() -> None:
        items = [{**c, "last_touch_at": _when(c.get("last_touch_at"))} for c in result["items"]]
        click.echo(_table(items, _CONTACT_COLUMNS, width=32) if items else "no contacts match")
        if len(items) == result["limit"]:
            click.echo(f"(first {result['limit']} from offset {result['offset']}; use --offset for more)")

    emit(result, human)


# --- interactions --------------------------------------------------------------------------------


@main.group()
def interactions() -> None:
    """Interactions: log and list."""


@interactions.command("log")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option(
    "--type",
    "itype",
    required=True,
    help="email_sent, email_received, ticket_opened, ticket_resolved, call, note, order_placed, "
    "refund_processed, nudge_sent, sequence_started or sequence_completed.",
)
@click.option("--direction", help="inbound or outbound.")
@click.option("--subject")
@click.option("--content", help="The raw content (summarised at once).")
@click.option("--content-file", type=click.File("r"), help="Read the raw content from a file (- for stdin).")
@click.option("--external-id", help="Id in the source system; a repeat is a duplicate, not a new row.")
@click.option("--thread-id")
@click.option("--campaign-id")
@click.option("--metadata", help="A JSON object.")
def interactions_log(
    contact_id: uuid.UUID,
    itype: str,
    direction: str | None,
    subject: str | None,
    content: str | None,
    content_file: IO[str] | None,
    external_id: str | None,
    thread_id: str | None,
    campaign_id: str | None,
    metadata: str | None,
) -> None:
    """Log an interaction with a contact; it is summarised at write time (log_interaction)."""
    if content is not None and content_file is not None:
        raise click.UsageError("give --content or --content-file, not both")
    raw = content_file.read() if content_file is not None else content
    from cortex import interactions as interactions_svc  # loads the Anthropic SDK: only when needed

    result = interactions_svc.log_interaction(
        _state().claims(),
        contact_id=str(contact_id),
        type=itype,
        direction=direction,
        subject=subject,
        raw_content=raw,
        external_id=external_id,
        thread_id=thread_id,
        campaign_id=campaign_id,
        metadata=_json_object(metadata, "--metadata"),
    )

    def human() -> None:
        state = "duplicate of an earlier log" if result.get("duplicate") else "logged"
        click.echo(f"{state}: interaction {result['id']} ({result['type']} by {result['agent']})")
        if result.get("summary"):
            click.echo(f"  summary:   {result['summary']}")
            click.echo(f"  sentiment: {result.get('sentiment')}   intent: {result.get('intent')}")
        else:
            click.echo("  summary:   pending (the worker summarises it)")
        if result.get("context_refresh_triggered"):
            click.echo("  context refresh queued")

    emit(result, human)


@interactions.command("list")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option("--agent", "by_agent", help="Only this agent's interactions.")
@click.option("--type", "itype")
@click.option("--since", help="ISO 8601 timestamp.")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--include-raw", is_flag=True, help="Include raw_content.")
def interactions_list(
    contact_id: uuid.UUID,
    by_agent: str | None,
    itype: str | None,
    since: str | None,
    limit: int,
    include_raw: bool,
) -> None:
    """A contact's interactions, newest first (list_interactions)."""
    from cortex import interactions as interactions_svc

    result = interactions_svc.list_interactions(
        _state().claims(),
        contact_id=str(contact_id),
        agent=by_agent,
        type=itype,
        since=_timestamp(since),
        limit=limit,
        include_raw=include_raw or None,
    )

    def human() -> None:
        items = [
            {**i, "created_at": _when(i.get("created_at")), "summary": i.get("summary") or "(pending)"}
            for i in result["items"]
        ]
        if not items:
            click.echo("no interactions")
            return
        click.echo(
            _table(
                items,
                [
                    ("created_at", "date"),
                    ("agent", "agent"),
                    ("type", "type"),
                    ("sentiment", "sentiment"),
                    ("summary", "summary"),
                ],
                width=70,
            )
        )
        if include_raw:
            for i in result["items"]:
                click.echo(f"\n--- {i['id']} {i.get('subject') or ''}\n{i.get('raw_content') or ''}")

    emit(result, human)


# --- context -------------------------------------------------------------------------------------


def _context_text(r: Mapping[str, Any]) -> None:
    h = r.get("header") or {}
    who = h.get("name") or h.get("email") or r["contact_id"]
    click.echo(
        f"{who}" + (f" — {h['company']}" if h.get("company") else "") + (f" [{h['stage']}]" if h.get("stage") else "")
    )
    click.echo(
        f"  level {r['level']}: {r['token_count']}/{r['token_budget']} tokens"
        + (", truncated" if r.get("truncated") else "")
        + (", stale" if r.get("is_stale") else "")
        + (" (refresh queued)" if r.get("refresh_queued") else "")
        + f"; generated {_when(r.get('generated_at'))}"
    )
    if h.get("last_touch"):
        click.echo(
            f"  last touch {_when(h['last_touch'])}"
            + (f" by {h['last_touch_agent']}" if h.get("last_touch_agent") else "")
        )
    ctx = r.get("context") or {}
    if ctx.get("summary"):
        click.echo(f"\n{ctx['summary']}")
    if ctx.get("key_facts"):
        click.echo("\nKey facts:")
        for fact in ctx["key_facts"]:
            click.echo(f"  - {fact}")
    for key, label in (("current_status", "Status"), ("recommended_tone", "Tone")):
        if ctx.get(key):
            click.echo(f"{label}: {ctx[key]}")
    sig = ctx.get("signals") or {}
    if sig:
        click.echo(
            f"Signals: churn risk {sig.get('churn_risk', '-')}, upsell potential {sig.get('upsell_potential', '-')}"
            + "".join(f"\n  risk: {f}" for f in sig.get("risk_factors") or [])
            + "".join(f"\n  opportunity: {f}" for f in sig.get("opportunity_factors") or [])
        )
    for t in ctx.get("open_threads") or []:
        click.echo(f"Open thread: {t.get('thread_id', '')} {t.get('subject') or t.get('summary') or ''}".rstrip())
    handoff = r.get("last_handoff")
    if handoff:
        click.echo(f"Last handoff: {handoff.get('from')} -> {handoff.get('to')}: {handoff.get('reason')}")
    items = r.get("recent_interactions")
    if items is not None:
        click.echo(f"\nRecent interactions ({len(items)} of {r.get('interactions_total')}):")
        shown = [{**i, "date": _when(i.get("date"))} for i in items]
        click.echo(
            _table(
                shown,
                [
                    ("date", "date"),
                    ("agent", "agent"),
                    ("type", "type"),
                    ("sentiment", "sentiment"),
                    ("summary", "summary"),
                ],
                width=70,
            )
            if shown
            else "  none"
        )


@main.group()
def context() -> None:
    """Working context of a contact: get, refresh."""


@context.command("get")
@click.argument("contact_id", type=click.UUID)
@click.option(
    "--level",
    type=click.IntRange(0, 3),
    default=1,
    show_default=True,
    help="0 header, 1 + summary, 2 + recent interactions, 3 + history to the agent's budget.",
)
@click.option("--refresh", is_flag=True, help="Regenerate the context first.")
def context_get(contact_id: uuid.UUID, level: int, refresh: bool) -> None:
    """The contact's working context at a level, within its token budget (get_context)."""
    from cortex import context as context_svc

    result = context_svc.get_context(_state().claims(), str(contact_id), level=level, refresh=refresh)
    emit(result, lambda: _context_text(result))


@context.command("refresh")
@click.argument("contact_id", type=click.UUID)
def context_refresh(contact_id: uuid.UUID) -> None:
    """Regenerate the contact's working context now (refresh_context)."""
    from cortex import context as context_svc

    result = context_svc.refresh_context(_state().claims(), str(contact_id))

    def human() -> None:
        if result.get("regenerated"):
            click.echo(
                f"regenerated context of {result['contact_id']}: {result.get('token_count')} tokens "
                f"(previous {_when(result.get('previous_generated_at'))})"
            )
        else:
            click.echo(
                f"context of {result['contact_id']} not regenerated now; queued for the worker"
                + (f": {result['error']}" if result.get("error") else "")
            )

    emit(result, human)


# --- handoffs ------------------------------------------------------------------------------------

_HANDOFF_COLUMNS = (("id", "id"), ("urgency", "urgency"), ("status", "status"), ("from_agent", "from"),
                    ("to", "to"), ("reason", "reason"), ("created_at", "created"))  # fmt: skip


def _handoff_rows(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**h, "to": h.get("to_agent") or f"human:{h.get('to_human_id')}",
             "created_at": _when(h.get("created_at"))} for h in items]  # fmt: skip


@main.group()
def handoffs() -> None:
    """Handoffs between agents and to humans: create, queue, list, status."""


@handoffs.command("create")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option("--to-agent", help="The receiving agent (or --to-human-id).")
@click.option("--to-human-id", help="The receiving human (or --to-agent).")
@click.option("--reason", required=True, help="warm_reply, escalation, complex_question, upsell_opportunity, "
              "churn_risk, completed_sequence, customer_request or other.")  # fmt: skip
@click.option("--reason-detail")
@click.option("--context-summary", help="What the receiver needs to know (generated when absent).")
@click.option("--suggested-action")
@click.option("--urgency", default="normal", show_default=True, help="low, normal, high or urgent.")
def handoffs_create(contact_id: uuid.UUID, to_agent: str | None, to_human_id: str | None, reason: str,
                    reason_detail: str | None, context_summary: str | None, suggested_action: str | None,
                    urgency: str) -> None:  # fmt: skip
    """Hand a contact from --agent to another agent or a human (create_handoff)."""
    from cortex import handoffs as handoffs_svc

    result = handoffs_svc.create_handoff(
        _state().claims(), contact_id=str(contact_id), to_agent=to_agent, to_human_id=to_human_id, reason=reason,
        reason_detail=reason_detail, context_summary=context_summary, suggested_action=suggested_action,
        urgency=urgency)  # fmt: skip
    emit(result, f"handoff {result['id']} {result['status']}; notified {', '.join(result['notifications_sent'])}\n"
                 f"{result['context_summary']}")  # fmt: skip


@handoffs.command("pending")
@click.option("--for-agent", "agent", help="Only handoffs to this agent.")
@click.option("--human-id", help="Only handoffs to this human.")
@click.option("--urgency")
@click.option("--limit", type=int, default=20, show_default=True)
def handoffs_pending(agent: str | None, human_id: str | None, urgency: str | None, limit: int) -> None:
    """Pending handoffs, most urgent first, then oldest (get_pending_handoffs)."""
    from cortex import handoffs as handoffs_svc

    result = handoffs_svc.get_pending_handoffs(_state().claims(), agent=agent, human_id=human_id,
                                               urgency=urgency, limit=limit)  # fmt: skip
    emit(result, _table(_handoff_rows(result["items"]), _HANDOFF_COLUMNS) if result["items"] else "no pending handoffs")


@handoffs.command("list")
@click.option("--since", help="ISO timestamp: created or changed since then.")
@click.option("--status")
@click.option("--contact-id", type=click.UUID)
@click.option("--limit", type=int, default=20, show_default=True)
def handoffs_list(since: str | None, status: str | None, contact_id: uuid.UUID | None, limit: int) -> None:
    """Handoffs by time, status or contact: the stand-up view (list_handoffs)."""
    from cortex import handoffs as handoffs_svc

    result = handoffs_svc.list_handoffs(_state().claims(), since=_timestamp(since), status=status,
                                        contact_id=str(contact_id) if contact_id else None, limit=limit)  # fmt: skip
    emit(result, _table(_handoff_rows(result["items"]), _HANDOFF_COLUMNS) if result["items"] else "no handoffs")


@handoffs.command("get")
@click.argument("handoff_id", type=click.UUID)
def handoffs_get(handoff_id: uuid.UUID) -> None:
    """One handoff with its allowed moves and audit trail (get_handoff)."""
    from cortex import handoffs as handoffs_svc

    result = handoffs_svc.get_handoff(_state().claims(), str(handoff_id))
    emit(result, _dump(result))


@handoffs.command("update")
@click.argument("handoff_id", type=click.UUID)
@click.option("--status", required=True, help="accepted, completed or rejected.")
@click.option("--note")
def handoffs_update(handoff_id: uuid.UUID, status: str, note: str | None) -> None:
    """Move a handoff: pending → accepted → completed, or pending/accepted → rejected (update_handoff_status)."""
    from cortex import handoffs as handoffs_svc

    result = handoffs_svc.update_handoff_status(_state().claims(), str(handoff_id), status, note)
    emit(result, f"handoff {result['id']} is {result['status']}")


# --- usage and budgets -----------------------------------------------------------------------------


@main.group()
def usage() -> None:
    """Token usage and daily budgets."""


@usage.command("summary")
@click.option("--period", default="day", show_default=True, help="day, week or month (tenant time zone).")
@click.option("--for-agent", "agent", help="Only this agent.")
def usage_summary(period: str, agent: str | None) -> None:
    """Totals, by agent, by model and budget status (usage_summary)."""
    from cortex import usage as usage_svc

    result = usage_svc.usage_summary(_state().claims(), period, agent)
    rows = [{"agent": a, **v} for a, v in result["by_agent"].items()]
    columns = (("agent", "agent"), ("total_tokens", "tokens"), ("cost_usd", "cost"), ("operations", "ops"))
    totals = result["totals"]
    head = f"{result['period']} from {result['start']} to {result['end']}: {totals['total_tokens']} tokens, "
    emit(result, head + f"${totals['cost_usd']}" + ("\n" + _table(rows, columns) if rows else ""))


@usage.command("budget-check")
@click.argument("agent")
@click.option("--estimated-tokens", type=click.IntRange(0), default=0, show_default=True)
def usage_budget_check(agent: str, estimated_tokens: int) -> None:
    """Whether an operation fits the agent's daily budget, with a recommendation (budget_check)."""
    from cortex import usage as usage_svc

    result = usage_svc.budget_check(_state().claims(), agent, estimated_tokens)
    emit(result, f"{result['agent']}: {result['used_today']}/{result['daily_budget']} used, "
                 f"{result['remaining']} left -> {result['recommendation']}")  # fmt: skip


# --- outbox (webhook dead letters) -------------------------------------------------------------


@main.group()
def outbox() -> None:
    """Webhook outbox: list and replay dead letters."""


_DEAD_COLUMNS = (("id", "id"), ("event", "event"), ("recipient", "recipient"), ("attempts", "tries"),
                 ("last_status_code", "http"), ("last_error", "last error"), ("updated_at", "dead since"))  # fmt: skip


@outbox.command("dead")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True, help="At most this many.")
@click.option("--all-tenants", is_flag=True, help="Every tenant's dead letters, not only --tenant's.")
def outbox_dead(limit: int, all_tenants: bool) -> None:
    """List dead-lettered webhook messages, oldest first, with their last error."""
    from cortex import webhooks

    state = _state()
    tenant_id = None if all_tenants else state.tenant_id()
    with state.connect() as conn:
        rows = webhooks.list_dead_letters(conn, tenant_id=tenant_id, limit=limit)

    def human() -> None:
        if not rows:
            click.echo("no dead letters")
            return
        click.echo(_table([{**r, "updated_at": _when(r["updated_at"])} for r in rows], _DEAD_COLUMNS))

    emit(rows, human)


@outbox.command("replay")
@click.argument("ids", nargs=-1, type=click.IntRange(min=1))
@click.option("--all", "all_dead", is_flag=True, help="Replay every dead letter of --tenant.")
@click.option("--all-tenants", is_flag=True, help="Do not limit to --tenant (with --all: every tenant's).")
def outbox_replay(ids: tuple[int, ...], all_dead: bool, all_tenants: bool) -> None:
    """Queue dead letters again with a fresh set of attempts: the given IDs, or --all."""
    from cortex import webhooks

    if bool(ids) == all_dead:
        raise click.UsageError("give the IDs of the dead letters to replay, or --all (not both)")
    state = _state()
    tenant_id = None if all_tenants else state.tenant_id()
    with state.connect() as conn:
        n = webhooks.replay_dead_letters(conn, list(ids) or None, tenant_id=tenant_id, all_dead=all_dead)
    emit({"replayed": n}, f"replayed {n} dead letter(s); the worker delivers them again now")


if __name__ == "__main__":  # pragma: no cover
    main()
