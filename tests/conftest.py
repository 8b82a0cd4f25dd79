"""Test harness: a real PostgreSQL with the real extensions, never a mock.

One template database is migrated per run; every test gets its own copy
(`CREATE DATABASE ... TEMPLATE`, through pytest-postgresql's DatabaseJanitor), so hundreds of
database tests stay fast and isolated. `as_agent` opens a transaction the way PostgREST runs a
request: `set local role authenticated` plus the JWT claims GUC.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import psycopg
import pytest
from functions_framework.aio import create_asgi_app
from psycopg.rows import dict_row
from pytest_postgresql.janitor import DatabaseJanitor
from starlette.applications import Starlette
from starlette.testclient import TestClient

from cortex import auth
from cortex import db as cortex_db
from cortex.config import get_settings
from cortex.migrate import migrate
from tests.fake_anthropic import FakeAnthropic


def _admin_dsn() -> str:
    dsn = os.environ.get("CORTEX_TEST_DSN")
    if not dsn and os.path.exists(".env.local"):
        with open(".env.local") as env:
            for line in env:
                if line.startswith("CORTEX_TEST_DSN="):
                    dsn = line.split("=", 1)[1].strip()
    return dsn or "postgresql://cortex:cortex@127.0.0.1:5432/postgres"


ADMIN_DSN = _admin_dsn()
_U = urlparse(ADMIN_DSN)


def dsn_for(dbname: str) -> str:
    """DSN of another database on the test cluster."""
    return _U._replace(path="/" + dbname).geturl()


def _janitor(dbname: str, template: str | None = None, as_template: bool = False) -> DatabaseJanitor:
    return DatabaseJanitor(
        user=_U.username or "postgres",
        host=_U.hostname or "127.0.0.1",
        port=_U.port or 5432,
        password=_U.password,
        dbname=dbname,
        template_dbname=template,
        as_template=as_template,
    )


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    """A database migrated once per run, copied for each test."""
    name = f"cortex_tpl_{os.getpid()}"
    janitor = _janitor(name, as_template=True)
    janitor.init()
    try:
        migrate(dsn_for(name))
        # A template must have no connections when it is copied.
        with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
            c.execute("select pg_terminate_backend(pid) from pg_stat_activity where datname = %s", (name,))
        yield name
    finally:
        janitor.drop()


@pytest.fixture
def dsn(template_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh, migrated database for this test; DATABASE_URL points at it."""
    name = f"cortex_t_{uuid.uuid4().hex[:12]}"
    janitor = _janitor(name, template=template_db)
    janitor.init()
    url = dsn_for(name)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    get_settings.cache_clear()
    try:
        yield url
    finally:
        cortex_db.close_pool()
        get_settings.cache_clear()
        janitor.drop()


@pytest.fixture
def admin(dsn: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """A superuser connection to the test database (the owner: RLS does not apply)."""
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        yield conn


@dataclass
class Tenant:
    """A tenant made for a test, with its agents' API keys."""

    id: str
    slug: str
    keys: dict[str, str] = field(default_factory=dict)


TenantFactory = Callable[..., Tenant]


@pytest.fixture
def make_tenant(admin: psycopg.Connection[dict[str, Any]]) -> TenantFactory:
    """Creates a tenant with agents luna, mia, anna, jasper and read-only helios, each with a key."""

    def make(slug: str | None = None, time_zone: str = "UTC") -> Tenant:
        slug = slug or f"t-{uuid.uuid4().hex[:8]}"
        tid = admin.execute("select cortex.create_tenant(%s, %s, %s) as id", (slug.title(), slug, time_zone)).fetchone()
        assert tid is not None
        t = Tenant(str(tid["id"]), slug)
        for name in ("luna", "mia", "anna", "jasper"):
            admin.execute("select cortex.create_agent(%s, %s)", (t.id, name))
        admin.execute("select cortex.create_agent(%s, 'helios', 'Helios', 'monitor', true)", (t.id,))
        for name in ("luna", "mia", "anna", "jasper", "helios"):
            row = admin.execute("select cortex.create_agent_key(%s, %s) as k", (t.id, name)).fetchone()
            assert row is not None
            t.keys[name] = row["k"]
        return t

    return make


@pytest.fixture
def tenant(make_tenant: TenantFactory) -> Tenant:
    """The first tenant of a test."""
    return make_tenant("acme")


@pytest.fixture
def other_tenant(make_tenant: TenantFactory) -> Tenant:
    """A second tenant, to prove isolation."""
    return make_tenant("globex")


AsAgent = Callable[[Tenant, str], AbstractContextManager[psycopg.Connection[Any]]]


@pytest.fixture
def as_agent(dsn: str) -> Iterator[AsAgent]:
    """`with as_agent(tenant, "luna") as conn:` runs a transaction as PostgREST would for that agent."""

    @contextmanager
    def _as(t: Tenant, agent: str) -> Iterator[psycopg.Connection[Any]]:
        with (
            psycopg.connect(dsn, autocommit=True) as conn,
            cortex_db.as_caller(cortex_db.agent_claims(t.id, agent), conn) as c,
        ):
            yield c

    yield _as


@pytest.fixture
def contact(tenant: Tenant, as_agent: AsAgent) -> dict[str, Any]:
    """A contact of the first tenant."""
    with as_agent(tenant, "luna") as conn:
        result: dict[str, Any] = cortex_db.call(
            conn,
            "upsert_contact",
            email="john@acme.com",
            name="John Smith",
            company_name="Acme Corp",
            stage="customer",
        )
    return result


MAIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "functions", "main.py")


@pytest.fixture(scope="session")
def app() -> Starlette:
    """The app exactly as `functions-framework --asgi --source functions/main.py --target api` builds it."""
    built: Starlette = create_asgi_app(target="api", source=MAIN)
    return built


@pytest.fixture
def client(app: Starlette, dsn: str) -> Iterator[TestClient]:
    """A test client on a fresh database, with no cached key lookups from earlier tests.

    One event loop for the whole test (the context manager), so the async pool opened by the
    first request serves the rest; it is closed in that loop before the database is dropped."""
    auth.clear_key_cache()
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client
        test_client.portal.call(cortex_db.aclose_pool)  # type: ignore[union-attr]
    auth.clear_key_cache()


@pytest.fixture
def claude(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """The local stand-in of the Messages API, configured as Cortex's Claude (no SDK retries)."""
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("CORTEX_LLM_MAX_RETRIES", "0")
        get_settings.cache_clear()
        yield fake
    get_settings.cache_clear()


ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(command: Sequence[str], port: int, env: dict[str, str], log_path: Path) -> Iterator[str]:
    """Runs a server process (`command`, listening on `port`) until /health answers; its base URL.
    Stopped with SIGTERM (then SIGKILL) on exit; its output goes to `log_path`."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(list(command), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            # `cortex serve` workers load the embedding model before they listen: 5-10 s each on
            # 2 cores, over 30 s when torch's files are not in the page cache yet.
            deadline = time.monotonic() + 90
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "server did not start within 90 s"
                time.sleep(0.2)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@contextmanager
def cortex_serve(dsn: str, log_path: Path, **extra_env: str) -> Iterator[str]:
    """`cortex serve` with two workers on a free loopback port against `dsn`; its base URL."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": dsn, **extra_env}
    env.pop("ANTHROPIC_API_KEY", None)
    cortex = Path(sys.executable).parent / "cortex"
    command = [str(cortex), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    with running_server(command, port, env, log_path) as base:
        yield base
