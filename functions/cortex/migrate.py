"""Applies sql/supabase_platform.sql (local stand-in) and supabase/migrations in order.

Applied versions are recorded in supabase_migrations.schema_migrations, the table the Supabase
CLI itself keeps, so a database migrated here and one migrated by `supabase db push` agree.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS_DIR = ROOT / "supabase" / "migrations"
PLATFORM_SQL = ROOT / "sql" / "supabase_platform.sql"
_NAME = re.compile(r"^(\d{14})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One migration file: version (timestamp), name and SQL text."""

    version: str
    name: str
    path: Path

    @property
    def sql(self) -> str:
        return self.path.read_text()


def list_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migrations in version order; a file that does not follow the naming rule is an error."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise ValueError(f"migration file {path.name} must be named <14-digit timestamp>_<name>.sql")
        found.append(Migration(m.group(1), m.group(2), path))
    return found


def files_digest() -> str:
    """A short hash of every migration file and the platform stand-in, in that order (the same as
    `cat supabase/migrations/*.sql sql/supabase_platform.sql | sha256sum` in scripts/dev): it names
    the files a local database was built from, while migrations are still edited in place."""
    h = hashlib.sha256()
    for m in list_migrations():
        h.update(m.path.read_bytes())
    h.update(PLATFORM_SQL.read_bytes())
    return h.hexdigest()[:16]


def applied_versions(conn: psycopg.Connection) -> set[str]:
    """Versions already recorded in supabase_migrations.schema_migrations."""
    conn.execute("create schema if not exists supabase_migrations")
    conn.execute(
        "create table if not exists supabase_migrations.schema_migrations "
        "(version text primary key, statements text[], name text)"
    )
    return {r[0] for r in conn.execute("select version from supabase_migrations.schema_migrations")}


def migrate(dsn: str, *, platform: bool = True) -> list[str]:
    """Applies the platform stand-in (when asked) and every pending migration, each in its own
    transaction; returns the versions applied."""
    done: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        if platform:
            # Roles are cluster-wide: serialise concurrent set-ups of several databases.
            with conn.transaction():
                conn.execute("select pg_advisory_xact_lock(7267001)")
                conn.execute(PLATFORM_SQL.read_text())
        with conn.transaction():
            conn.execute("select pg_advisory_xact_lock(7267002)")
            have = applied_versions(conn)
        for mig in list_migrations():
            if mig.version in have:
                continue
            with conn.transaction():
                conn.execute(mig.sql)
                conn.execute(
                    "insert into supabase_migrations.schema_migrations (version, name) values (%s, %s)",
                    (mig.version, mig.name),
                )
            done.append(mig.version)
    return done
