"""HTTP routes of handoffs: create, pending queue, stand-up list, status changes, and bad input."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import Tenant

V1 = "/api/v1"


def new_contact(client: TestClient, key: str, email: str = "john@acme.com") -> str:
    response = client.post(f"{V1}/contacts", json={"email": email, "name": "John Smith"}, headers=bearer(key))
    return str(body_of(response)["id"])


def handoff(client: TestClient, key: str, **fields: Any) -> Any:
    return client.post(f"{V1}/handoffs", json={"reason": "warm_reply", **fields}, headers=bearer(key))


def counts(admin: Any) -> dict[str, Any]:
    row = admin.execute(
        "select (select count(*) from cortex.handoff_events) as handoffs, (select count(*) from cortex.outbox) as "
        "outbox, (select string_agg(coalesce(owner_agent, '-'), ',') from cortex.contacts) as owners"
    ).fetchone()
    return dict(row)


def test_create_handoff_generates_the_briefing_and_notifies_receiver_and_monitor(
    client: TestClient, tenant: Tenant, admin: Any
) -> None:
    cid = new_contact(client, tenant.keys["anna"])
    response = handoff(
        client,
        tenant.keys["anna"],
        contact_id=cid,
        from_agent="anna",
        to_agent="jasper",
        urgency="high",
        reason_detail="Prospect asked about bulk pricing for 1000+ units",
    )
    assert response.status_code == 201
    created = body_of(response)
    assert created["status"] == "pending" and created["context_refreshed"] is True
    assert created["notifications_sent"] == ["jasper", "helios"]
    assert created["context_summary"]
    assert admin.execute("select owner_agent from cortex.contacts").fetchone()["owner_agent"] == "jasper"
    recipients = {r["recipient"] for r in admin.execute("select recipient from cortex.outbox").fetchall()}
    assert recipients == {"agent:jasper", "monitor"}


def test_pending_queue_is_most_urgent_first_and_status_moves_follow_the_rules(
    client: TestClient, tenant: Tenant
) -> None:
    key = tenant.keys["anna"]
    low = body_of(handoff(client, key, contact_id=new_contact(client, key, "a@x.co"), to_agent="jasper", urgency="low"))
    urgent = body_of(
        handoff(client, key, contact_id=new_contact(client, key, "b@x.co"), to_agent="jasper", urgency="urgent")
    )
    pending = body_of(client.get(f"{V1}/handoffs/pending?agent=jasper", headers=bearer(tenant.keys["jasper"])))
    assert [h["id"] for h in pending["items"]] == [urgent["id"], low["id"]]

    jasper = bearer(tenant.keys["jasper"])
    accepted = client.patch(f"{V1}/handoffs/{urgent['id']}", json={"status": "accepted"}, headers=jasper)
    assert accepted.status_code == 200 and body_of(accepted)["status"] == "accepted"
    again = client.patch(f"{V1}/handoffs/{urgent['id']}", json={"status": "accepted"}, headers=jasper)
    back = client.patch(f"{V1}/handoffs/{urgent['id']}", json={"status": "pending"}, headers=jasper)
    assert again.status_code == 409 and back.status_code == 409
    assert set(error_of(again)["allowed"]) == {"completed", "rejected"}
    done = client.patch(f"{V1}/handoffs/{urgent['id']}", json={"status": "completed"}, headers=jasper)
    assert body_of(done)["status"] == "completed"
    listed = body_of(client.get(f"{V1}/handoffs?status=completed", headers=bearer(tenant.keys["helios"])))
    assert [h["id"] for h in listed["items"]] == [urgent["id"]]
    one = body_of(client.get(f"{V1}/handoffs/{urgent['id']}", headers=jasper))
    assert one["status"] == "completed"


@pytest.mark.parametrize(
    ("fields", "field", "status"),
    [
        ({"to_agent": "jasper", "to_human_id": "rep-1"}, "to_agent", 422),
        ({}, "to_agent", 422),
        ({"to_agent": "nobody"}, "to_agent", 422),
        ({"to_agent": "jasper", "reason": "boredom"}, "reason", 422),
        ({"to_agent": "jasper", "urgency": "whenever"}, "urgency", 422),
        ({"to_agent": "jasper", "contact_id": str(uuid.UUID(int=9))}, "contact_id", 404),
    ],
)
def test_create_handoff_rejects_bad_input_naming_the_field_and_writes_nothing(
    client: TestClient, tenant: Tenant, admin: Any, fields: dict[str, Any], field: str, status: int
) -> None:
    cid = new_contact(client, tenant.keys["anna"])
    before = counts(admin)
    response = handoff(client, tenant.keys["anna"], **{"contact_id": cid, **fields})
    assert response.status_code == status
    assert error_of(response)["field"] == field
    assert counts(admin) == before


def test_bad_status_change_and_read_only_writer_are_refused(client: TestClient, tenant: Tenant, admin: Any) -> None:
    cid = new_contact(client, tenant.keys["anna"])
    created = body_of(handoff(client, tenant.keys["anna"], contact_id=cid, to_human_id="rep-7"))
    bad = client.patch(f"{V1}/handoffs/{created['id']}", json={"status": "lost"}, headers=bearer(tenant.keys["mia"]))
    assert bad.status_code == 422 and error_of(bad)["field"] == "status"
    before = counts(admin)
    refused = handoff(client, tenant.keys["helios"], contact_id=cid, to_agent="jasper")
    assert refused.status_code == 403
    refused_patch = client.patch(
        f"{V1}/handoffs/{created['id']}", json={"status": "accepted"}, headers=bearer(tenant.keys["helios"])
    )
    assert refused_patch.status_code == 403
    assert counts(admin) == before
    unknown = client.patch(
        f"{V1}/handoffs/{uuid.uuid4()}", json={"status": "accepted"}, headers=bearer(tenant.keys["mia"])
    )
    assert unknown.status_code == 404


def test_another_tenants_handoff_is_invisible(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    cid = new_contact(client, tenant.keys["anna"])
    created = body_of(handoff(client, tenant.keys["anna"], contact_id=cid, to_agent="jasper"))
    other = bearer(other_tenant.keys["jasper"])
    assert client.get(f"{V1}/handoffs/{created['id']}", headers=other).status_code == 404
    assert client.patch(f"{V1}/handoffs/{created['id']}", json={"status": "accepted"}, headers=other).status_code == 404
    assert body_of(client.get(f"{V1}/handoffs/pending", headers=other))["items"] == []
