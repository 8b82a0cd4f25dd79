"""Schemathesis over the live API: `cortex serve` on a loopback port against a test database,
driven from its own `/api/v1/openapi.json` with an agent key.

Every operation gets generated requests (the examples, coverage and fuzzing phases; 25 per
operation here, deterministic; `scripts/bench fuzz` runs more) and three checks: no 5xx, every
status code documented, every body as documented. The tenant has a contact and a handoff, and
path, query and header values that name tenant data (ids, agents) are pinned to them, so the
requests reach the SQL instead of stopping at "unknown contact".

CORTEX_FUZZ_EXAMPLES sets the examples per operation; CORTEX_FUZZ_REPORT names a JSON file that
receives what was sent and answered (scripts/bench_fuzz.py reads it).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from cortex import db as cortex_db
from tests.conftest import AsAgent, Tenant, cortex_serve

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = int(os.environ.get("CORTEX_FUZZ_EXAMPLES", "25"))
REPORT = os.environ.get("CORTEX_FUZZ_REPORT")
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]
# Headers that only the service key may send (an agent key sending them is a documented 401).
SERVICE_ONLY_HEADERS = ("X-Tenant-ID", "X-Agent")

pytestmark = pytest.mark.slow

# What was sent and answered, per operation (for the report).
SEEN: Counter[tuple[str, str]] = Counter()
SAMPLES: dict[tuple[str, str], str] = {}


@pytest.fixture
def live_server(dsn: str, tmp_path: Path) -> Iterator[str]:
    """`cortex serve` (two workers) on a free loopback port against the test database."""
    log_path = tmp_path / "server.log"
    with cortex_serve(dsn, log_path) as base:
        yield base
    # Anything the server logged as a failure is a finding even when the reply looked fine.
    errors = [line for line in log_path.read_text(errors="replace").splitlines() if "Traceback" in line]
    assert not errors, log_path.read_text(errors="replace")[-5000:]


@pytest.fixture
def api_schema(live_server: str, tenant: Tenant, as_agent: AsAgent) -> Any:
    """The live OpenAPI document as schemathesis reads it, with luna's key and real ids."""
    with as_agent(tenant, "luna") as conn:
        contact = cortex_db.call(conn, "upsert_contact", email="fuzz@acme.com", name="Fuzz Target")
    with as_agent(tenant, "luna") as conn:
        handoff = cortex_db.call(
            conn, "create_handoff", contact_id=contact["id"], to_agent="mia", reason="escalation",
            context_summary="Customer asked for a call back.",
        )  # fmt: skip
    config = schemathesis.Config.from_dict(
        {
            "seed": 20261122,
            "headers": {"Authorization": f"Bearer {tenant.keys['luna']}"},
            "generation": {"max-examples": EXAMPLES, "deterministic": True},
            "parameters": {
                "path.id": contact["id"],
                "path.contact_id": contact["id"],
                "query.contact_id": contact["id"],
                "path.agent": "luna",
                "query.agent": "luna",
            },
            "operations": [
                {"include-path-regex": "^/api/v1/handoffs/", "parameters": {"path.id": handoff["id"]}},
            ],
        }
    )
    return schemathesis.openapi.from_url(f"{live_server}/api/v1/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    # schemathesis 4.32's lazy loader reads `node._nodeid`, which pytest 9.2 no longer has.
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case: schemathesis.Case) -> None:
    for name in SERVICE_ONLY_HEADERS:
        if case.headers:
            case.headers.pop(name, None)
    response = case.call()
    outcome = str(response.status_code)
    operation = f"{case.operation.method.upper()} {case.operation.path}"
    if response.status_code == 422:
        try:
            error = response.json()["error"]
            outcome += f" {error.get('field')}"
            SAMPLES.setdefault((operation, outcome), str(error.get("message"))[:200])
        except (ValueError, KeyError, TypeError):
            pass
    SEEN[(operation, outcome)] += 1
    case.validate_response(response, checks=CHECKS)


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    SEEN.clear()
    SAMPLES.clear()
    started = time.monotonic()
    yield
    if REPORT:
        operations: dict[str, dict[str, int]] = {}
        for (operation, status), n in sorted(SEEN.items()):
            operations.setdefault(operation, {})[status] = n
        Path(REPORT).write_text(
            json.dumps(
                {
                    "examples_per_operation": EXAMPLES,
                    "requests": sum(SEEN.values()),
                    "seconds": round(time.monotonic() - started, 1),
                    "operations": operations,
                    "samples": {f"{o} -> {r}": m for (o, r), m in sorted(SAMPLES.items())},
                },
                indent=2,
            )
        )
