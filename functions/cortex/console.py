"""What every capability's commands share: the global state (tenant, agent, database), output
(`emit`, tables) and errors, and small argument parsers.

Exit codes: 0 ok, 1 error (the database or Cortex said no), 2 bad arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import psycopg
from psycopg.rows import dict_row

from cortex import db
from cortex.errors import CortexError, from_db_error

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

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """An owner connection (autocommit) for operator actions that are not agent API calls.

        Operators are trusted: a database error of a `db.call` on it says what the database said,
        even for 5xx errors (as an error raised by the connection itself does)."""
        with psycopg.connect(
            self.database_url, autocommit=True, row_factory=dict_row, connect_timeout=_CONNECT_TIMEOUT
        ) as conn:
            try:
                yield conn
            except CortexError as exc:
                cause = exc.__cause__
                if exc.status >= 500 and isinstance(cause, psycopg.Error):
                    raise _operator_db_error(cause) from cause
                raise

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
            names = [r["name"] for r in db.rows(conn, "cortex.list_agents", p_tenant_id=tid)]
        if self.agent not in names:
            raise CortexError(404, "unknown_agent", f'unknown agent "{self.agent}" in tenant {self.tenant or tid}',
                              "agent", f"agents of this tenant: {', '.join(names)}; "
                                       "create one with `cortex agents create NAME`")  # fmt: skip
        return db.agent_claims(tid, self.agent)


def _resolve_tenant(conn: psycopg.Connection[dict[str, Any]], ref: str | None) -> str:
    # A slug or a UUID; with no ref, the only tenant (the usual development set-up) if there is one.
    found = db.call(conn, "cortex.resolve_tenant", p_ref=ref or None)
    if found is not None:
        return str(found)
    tenants = db.rows(conn, "cortex.list_tenants", p_limit=21)
    slugs = ", ".join(t["slug"] for t in tenants[:20]) + (", ..." if len(tenants) > 20 else "")
    known = f"known tenants: {slugs}" if tenants else "there are no tenants yet"
    hint = f"{known}; create one with `cortex tenants create NAME SLUG` (or load `cortex demo`)"
    if not ref:
        raise CortexError(400, "tenant_required", "no tenant given: use --tenant SLUG or set CORTEX_TENANT",
                          "tenant", hint)  # fmt: skip
    raise CortexError(404, "unknown_tenant", f'unknown tenant "{ref}"', "tenant", hint)


def current_state() -> State:
    state = click.get_current_context().find_object(State)
    assert state is not None, "commands run under the main group, which creates the state"
    return state


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, default=str, ensure_ascii=False)


def emit(data: Any, human: Callable[[], None] | str) -> None:
    """Prints `data` as JSON with --json, else the human rendering (text or a callable printing it)."""
    if current_state().as_json:
        click.echo(dump(data))
    elif isinstance(human, str):
        click.echo(human)
    else:
        human()


def _report(exc: CortexError, as_json: bool) -> None:
    if as_json:
        click.echo(dump(exc.to_json()))
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


class CortexGroup(click.Group):
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


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], width: int = 44) -> str:
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


def when(value: Any) -> str:
    # ISO timestamps shortened to the minute for people; JSON output keeps them exact.
    return str(value)[:16].replace("T", " ") if value else "-"


# --- argument parsing helpers --------------------------------------------------------------------


def key_values(pairs: Sequence[str], option: str) -> dict[str, Any]:
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


def json_object(value: str | None, option: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON ({exc.msg})", param_hint=option) from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint=option)
    return parsed


def timestamp(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise click.BadParameter(f"not an ISO 8601 timestamp: {value!r}", param_hint="--since") from exc
