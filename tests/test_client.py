"""The Python SDK (`cortex.client`) against a live server: every route has a method, the
integration guide of docs/sdk.md runs as written, and every failure is a typed error."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import psycopg
import pytest
import uvicorn
from pydantic import BaseModel
from starlette.applications import Starlette

from cortex import auth
from cortex import db as cortex_db
from cortex.app import ROUTES
from cortex.client import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AsyncClient,
    AuthenticationError,
    Client,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
)
from cortex.contacts.models import Contact, ContactCreated
from cortex.context.models import WorkingContext
from cortex.routing import Route
from tests.conftest import Tenant, free_port

ROOT = Path(__file__).resolve().parents[1]
# Routes that are not part of the agents' API, so the SDK has no method for them: the voice
# platform's two webhooks (their own authentication, ElevenLabs' payloads), and the routes of the
# capabilities whose clients are browsers (pages, cookie sessions). Documented in docs/sdk.md.
NOT_IN_SDK = {"voice_client_data", "voice_post_call", "customer_chat_page"}
BROWSER_TAGS = {"dashboard"}


def in_sdk(route: Route) -> bool:
    """Whether the SDK must have a method for this route."""
    return route.name not in NOT_IN_SDK and route.tag not in BROWSER_TAGS


PATH_SAMPLES = {"agent": "luna", "phone": "+16125551234"}


@contextmanager
def serving(app: Starlette, close_pool: bool = True) -> Iterator[str]:
    """The app under uvicorn in a thread, on a free loopback port: a live server in this process
    (real HTTP, real database), its async pool closed in its own loop when it stops (`close_pool`:
    Cortex's app; an app that uses no pool of its own leaves Cortex's alone)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))

    async def run() -> None:
        try:
            await server.serve()
        finally:
            if close_pool:
                await cortex_db.aclose_pool()

    thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server stopped while starting"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join()


@pytest.fixture
def live_server(app: Starlette, dsn: str) -> Iterator[str]:
    """The base URL of a live Cortex on this test's database."""
    auth.clear_key_cache()
    with serving(app) as base:
        yield base
    auth.clear_key_cache()


def counted(log: list[str]) -> httpx.Client:
    """An httpx client that records every request it sends (retries included)."""
    return httpx.Client(event_hooks={"request": [lambda request: log.append(f"{request.method} {request.url.path}")]})


def python_blocks(markdown: str) -> list[str]:
    """The ```python blocks of a markdown page, in order."""
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


# --- coverage -------------------------------------------------------------------------------------


def test_every_api_route_has_a_method_on_both_clients_documenting_its_method_and_path() -> None:
    for route in filter(in_sdk, ROUTES):
        for cls in (Client, AsyncClient):
            method = getattr(cls, route.name, None)
            assert method is not None, f"{cls.__name__} has no method for route {route.name}"
            path = re.sub(r"<(\w+)>", r"<\1>", route.paths[-1].removeprefix("/api/v1"))
            assert (method.__doc__ or "").startswith(f"{route.method} {path}:"), route.name


def test_every_method_reaches_its_route(live_server: str, tenant: Tenant) -> None:
    """Each method, called with placeholder ids and empty models, is answered by its own route:
    a result or a refusal from the handler, never 'no route' or 'method not allowed'."""
    with Client(base_url=live_server, api_key=tenant.keys["luna"], max_retries=0) as cortex:
        for route in filter(in_sdk, ROUTES):
            args: list[Any] = [
                PATH_SAMPLES.get(f, str(uuid.uuid4())) for f in (route.path.model_fields if route.path else ())
            ]
            model = route.body or route.query
            if route.name == "import_interactions":
                args.append([])
            elif model is not None:
                args.append(model.model_construct())
            try:
                result = getattr(cortex, route.name)(*args)
            except APIError as exc:
                assert exc.code not in ("route_not_found", "method_not_allowed"), (route.name, str(exc))
            else:
                expected = route.responses.get(200) or route.responses.get(201) or dict
                assert isinstance(result, expected), route.name


# --- the integration guide ------------------------------------------------------------------------


def test_the_integration_guide_in_docs_sdk_runs_as_written(
    live_server: str, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    guide = python_blocks((ROOT / "docs" / "sdk.md").read_text())
    assert guide, "docs/sdk.md has no python block"
    monkeypatch.setenv("CORTEX_URL", live_server)
    monkeypatch.setenv("CORTEX_API_KEY", tenant.keys["luna"])
    monkeypatch.setenv("CORTEX_ANNA_KEY", tenant.keys["anna"])
    monkeypatch.setenv("CORTEX_JASPER_KEY", tenant.keys["jasper"])
    scope: dict[str, Any] = {"__name__": "guide"}
    for block in guide:
        exec(compile(block, "docs/sdk.md", "exec"), scope)  # the doc's own code, as a reader runs it
    assert isinstance(scope["context"], WorkingContext)
    assert scope["escalation"].status == "pending"
    assert scope["accepted"].status == "accepted"
    assert scope["budget"].agent == "anna"


# --- typed results and paging ----------------------------------------------------------------------


def test_methods_take_keywords_or_the_servers_model_and_return_its_response_models(
    live_server: str, tenant: Tenant
) -> None:
    from cortex.contacts.models import ContactCreate

    with Client(base_url=live_server, api_key=tenant.keys["luna"]) as cortex:
        created = cortex.upsert_contact(email="ada@example.com", name="Ada", stage="prospect")
        again = cortex.upsert_contact(ContactCreate(email="ada@example.com", name="Ada Lovelace"))
        as_dict = cortex.upsert_contact({"email": "ada@example.com"})
        fetched = cortex.get_contact(created.id)
    assert isinstance(created, ContactCreated) and created.created is True
    assert again.created is False and again.id == created.id == as_dict.id
    assert isinstance(fetched, Contact) and fetched.name == "Ada Lovelace"


def test_iter_contacts_pages_through_every_match(live_server: str, tenant: Tenant) -> None:
    log: list[str] = []
    with Client(base_url=live_server, api_key=tenant.keys["luna"], http_client=counted(log)) as cortex:
        for i in range(5):
            cortex.upsert_contact(email=f"p{i}@example.com", stage="prospect")
        log.clear()
        emails = sorted(c.email or "" for c in cortex.iter_contacts(stage="prospect", limit=2))
    assert emails == [f"p{i}@example.com" for i in range(5)]
    assert log == ["GET /api/v1/contacts"] * 3  # pages of 2, 2 and 1


def test_iter_memories_follows_next_cursor_to_the_last_page(live_server: str, tenant: Tenant) -> None:
    with Client(base_url=live_server, api_key=tenant.keys["luna"]) as cortex:
        for i in range(5):
            cortex.remember(kind="fact", title=f"Fact number {i}", body=f"The {i}th fact about pagination.")
        titles = sorted(m.title for m in cortex.iter_memories(kinds="fact", limit=2))
    assert titles == [f"Fact number {i}" for i in range(5)]


def test_the_async_client_makes_the_same_calls_and_raises_the_same_errors(live_server: str, tenant: Tenant) -> None:
    async def scenario() -> tuple[WorkingContext, list[str], AuthenticationError]:
        async with AsyncClient(base_url=live_server, api_key=tenant.keys["luna"]) as cortex:
            contact = await cortex.upsert_contact(email="async@example.com", name="Async", stage="prospect")
            context = await cortex.get_context(contact.id, level=1)
            emails = [c.email or "" async for c in cortex.iter_contacts(limit=1)]
        async with AsyncClient(base_url=live_server, api_key="ctx_wrong_key", max_retries=0) as wrong:
            with pytest.raises(AuthenticationError) as refused:
                await wrong.graph_stats()
        return context, emails, refused.value

    context, emails, refused = asyncio.run(scenario())
    assert context.level == 1 and emails == ["async@example.com"]
    assert refused.status == 401 and refused.request_id


def test_the_customer_methods_return_the_context_and_the_chats_stream_parts(
    live_server: str, tenant: Tenant, admin: Any
) -> None:
    """The chat's server-sent events come back as the stream's typed parts, in order (offline agent)."""
    keys = {}
    for name in ("customer_mgmt", "product_mgmt"):
        admin.execute("select cortex.create_agent(%s, %s)", (tenant.id, name))
        keys[name] = admin.execute("select cortex.create_agent_key(%s, %s) as k", (tenant.id, name)).fetchone()["k"]
    with Client(base_url=live_server, api_key=keys["customer_mgmt"]) as cortex:
        customer = cortex.upsert_contact(email="buyer@acme.example", name="Buyer", stage="customer").id
        context = cortex.get_customer_context(customer, max_tokens=500)
        parts = cortex.customer_chat_stream(
            customer, messages=[{"role": "user", "parts": [{"type": "text", "text": "Draft a product roadmap"}]}]
        )
    assert context.customer_id == customer and context.context.startswith("## Current Customer Context")
    kinds = [p.type for p in parts]
    assert kinds[0] == "start" and kinds[-1] == "finish" and "text-delta" in kinds
    assert "data-agent" in kinds  # who speaks, as the page shows it


# --- refusals -------------------------------------------------------------------------------------


def test_a_wrong_key_is_an_authentication_error_with_code_field_and_request_id(live_server: str) -> None:
    with (
        Client(base_url=live_server, api_key="ctx_nope_nope") as cortex,
        pytest.raises(AuthenticationError) as refused,
    ):
        cortex.search_contacts()
    error = refused.value
    assert (error.status, error.code, error.field) == (401, "unauthorized", "Authorization")
    assert error.request_id and re.fullmatch(r"[0-9a-f]{32}", error.request_id)
    assert "invalid or revoked API key" in str(error) and "cortex keys create" in (error.hint or "")


def test_bad_arguments_are_refused_before_sending_naming_the_field(live_server: str, tenant: Tenant) -> None:
    log: list[str] = []
    with Client(base_url=live_server, api_key=tenant.keys["luna"], http_client=counted(log)) as cortex:
        with pytest.raises(InvalidRequestError) as local:
            cortex.log_interaction(contact_id="not-a-uuid", type="email_sent")
        with pytest.raises(InvalidRequestError) as unknown_field:
            cortex.search_contacts(colour="red")
        assert log == []
        with pytest.raises(InvalidRequestError) as remote:
            cortex.budget_check("nobody")
    assert (local.value.field, local.value.status, local.value.request_id) == ("contact_id", 422, None)
    assert unknown_field.value.field == "colour"
    assert remote.value.field == "agent" and remote.value.request_id is not None


def test_another_tenants_contact_is_not_found_and_a_read_only_agent_may_not_write(
    live_server: str, tenant: Tenant, other_tenant: Tenant
) -> None:
    with Client(base_url=live_server, api_key=tenant.keys["luna"]) as luna:
        contact = luna.upsert_contact(email="mine@example.com")
    with Client(base_url=live_server, api_key=other_tenant.keys["luna"]) as stranger, pytest.raises(NotFoundError):
        stranger.get_context(contact.id)
    with Client(base_url=live_server, api_key=tenant.keys["helios"]) as helios, pytest.raises(PermissionDeniedError):
        helios.log_interaction(contact_id=contact.id, type="note", summary="monitors only read")


def test_over_budget_is_a_rate_limit_error_with_retry_after_and_is_not_retried(
    live_server: str, tenant: Tenant, admin: psycopg.Connection[dict[str, Any]]
) -> None:
    admin.execute(
        "update cortex.agent_config set daily_token_budget = 600 where tenant_id = %s and agent = 'anna'", (tenant.id,)
    )
    log: list[str] = []
    usage = {"model": "claude-haiku-4-5", "input_tokens": 400, "output_tokens": 200, "operation": "outreach"}
    with Client(base_url=live_server, api_key=tenant.keys["anna"], http_client=counted(log)) as anna:
        anna.record_usage(**usage)
        with pytest.raises(RateLimitError) as refused:
            anna.record_usage(**usage)
    assert refused.value.status == 429 and refused.value.retry_after is not None
    assert 0 < refused.value.retry_after <= 86400
    assert refused.value.details["recommendation"] == "alert_human"
    assert log == ["POST /api/v1/usage"] * 2


def test_an_unreachable_server_is_a_connection_error_after_the_retries() -> None:
    log: list[str] = []
    base = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    with Client(base_url=base, api_key="k", backoff=0, max_retries=2, http_client=counted(log)) as cortex:
        with pytest.raises(APIConnectionError) as read:
            cortex.graph_stats()
        with pytest.raises(APIConnectionError):
            cortex.remember(kind="fact", title="never sent", body="x")  # not connected: safe to retry a POST
    assert not isinstance(read.value, APITimeoutError)
    assert "cannot reach Cortex at" in str(read.value) and "after 3 attempts" in str(read.value)
    assert log == ["GET /api/v1/graph/stats"] * 3 + ["POST /api/v1/memories"] * 3


@contextmanager
def silent_server() -> Iterator[str]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_a_server_that_does_not_answer_is_a_timeout_error_and_a_post_is_sent_once() -> None:
    log: list[str] = []
    with (
        silent_server() as base,
        Client(base_url=base, api_key="k", timeout=0.2, backoff=0, max_retries=1, http_client=counted(log)) as cortex,
    ):
        with pytest.raises(APITimeoutError) as get:
            cortex.graph_version()
        with pytest.raises(APITimeoutError):
            cortex.remember(kind="fact", title="maybe sent", body="x")
    assert "no answer in time" in str(get.value) and "timeout" in str(get.value)
    assert log == ["GET /api/v1/graph/version"] * 2 + ["POST /api/v1/memories"]


class _Flaky(BaseHTTPRequestHandler):
    """Answers the first request of each method with an error (GET 429, POST 503; Retry-After: 0),
    then 200."""

    seen: ClassVar[set[str]] = set()

    def _answer(self) -> None:
        if self.command not in self.seen:
            self.seen.add(self.command)
            body, status = b'{"error": {"code": "database_unavailable", "message": "busy"}}', 503
            if self.command == "GET":
                body, status = b'{"error": {"code": "rate_limited", "message": "slow down"}}', 429
        else:
            body, status = b'{"status": "ok", "service": "cortex", "version": "t"}', 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        """Quiet."""


def test_a_429_after_its_retry_after_is_retried_for_a_get_but_a_503_is_not_for_a_post() -> None:
    _Flaky.seen = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    log: list[str] = []
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with Client(base_url=base, api_key="k", backoff=0, http_client=counted(log)) as cortex:
            health = cortex.health()
            with pytest.raises(ServerError) as refused:
                cortex.remember(kind="fact", title="t", body="b")
    finally:
        server.shutdown()
        thread.join()
    assert health.status == "ok"
    assert refused.value.status == 503 and refused.value.code == "database_unavailable"
    assert log == ["GET /api/v1/health"] * 2 + ["POST /api/v1/memories"]


def test_results_are_pydantic_models_of_the_server() -> None:
    for route in ROUTES:
        for model in route.responses.values():
            assert issubclass(model, BaseModel)


def test_the_sdk_and_the_mcp_server_are_packaged_with_cortex() -> None:
    from setuptools import find_packages

    packages = find_packages(str(ROOT / "functions"))
    assert {"cortex.client", "cortex.mcp_server"} <= set(packages)
