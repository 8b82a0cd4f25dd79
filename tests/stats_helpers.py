"""PostgreSQL's own row counters, for tests that prove a statement reads a few rows, not a table."""

from __future__ import annotations

from typing import Any


def rows_read(conn: Any, table: str) -> int:
    """Rows of `table` the connection's current transaction has read so far: rows returned by
    sequential scans plus rows fetched by index and bitmap scans."""
    row = conn.execute(
        "select pg_stat_get_xact_tuples_returned(%s::regclass::oid)"
        " + pg_stat_get_xact_tuples_fetched(%s::regclass::oid) as n",
        (table, table),
    ).fetchone()
    return int(row["n"] if isinstance(row, dict) else row[0])
