"""The auto-allowed path (policy allows, no card), over HTTP: what the agent, GET, the list and the
audit trail show; idempotency; bad input writes nothing; and a grant made or revoked by another
process applies to the very next request even though this process evaluated on its cached index
(the gate verifies the index's stamp in the request's own transaction: bot/approvals/gate.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.grants import FieldMatch, Grant, Scope
from storage.grants import GrantStore
from storage.stores import open_store
from tests.support.app import App, approval_body

POLICY = """\
rules:
  - name: reads-are-fine
    tool: read_*
    effect: allow
    tier: low
"""


pytestmark = pytest.mark.policy(POLICY)


def read(path: str, **overrides: object) -> dict[str, object]:
    return approval_body(action={"name": "read_file", "params": {"path": path}}, preview=None, risk="low",
                         **overrides)


async def submit(app: App, body: dict[str, object], **headers: str) -> tuple[int, dict[str, object]]:
    status, answer = await app.api("POST", "/api/v1/approvals", json=body, headers=headers)
    return status, answer


async def test_what_the_api_get_list_and_audit_show(papp: App) -> None:
    status, allowed = await submit(papp, read("/etc/motd"))
    assert status == 201 and allowed["status"] == "approved" and allowed["card"] is None
    assert allowed["decision"]["via"] == "policy" and allowed["decision"]["rule"] == "reads-are-fine"
    assert allowed["decision"]["decided_by"] is None and allowed["decision"]["changes"] == []
    assert allowed["policy"] == {**allowed["policy"], "outcome": "allow", "rule": "reads-are-fine", "tier": "low",
                                 "grant_id": None}
    assert (allowed["action"], allowed["approvers"], allowed["requested_by"]) == (
        {"name": "read_file", "params": {"path": "/etc/motd"}, "params_schema": None}, ["U1", "U2"], "support-agent")
    _, got = await papp.api("GET", f"/api/v1/approvals/{allowed['id']}")
    assert got == allowed  # what was answered is what was stored
    _, listed = await papp.api("GET", "/api/v1/approvals?status=approved")
    assert [r for r in listed["items"] if r["id"] == allowed["id"]] == [allowed]
    assert papp.signoff is not None
    audit = await papp.signoff.store.audit_events(str(allowed["id"]))
    assert [(e.type, e.actor, e.data) for e in audit] == [
        ("created", "support-agent", {"risk": "low"}),
        ("decided", None, {"outcome": "approved", "via": "policy", "rule": "reads-are-fine", "grant_id": None,
                           "tier": "low", "reason": "allowed by rule 'reads-are-fine' (line 2)", "changes": []}),
    ]
    assert [e.at for e in audit] == [datetime.fromisoformat(allowed["created_at"].replace("Z", "+00:00"))] * 2
    assert await papp.signoff.store.outbox_items(str(allowed["id"])) == []  # no card, no message


async def test_idempotency_key_and_bad_input(papp: App) -> None:
    first = await submit(papp, read("/a"), **{"Idempotency-Key": "k-1"})
    again = await submit(papp, read("/a"), **{"Idempotency-Key": "k-1"})
    assert (first[0], again[0]) == (201, 200) and first[1] == again[1]
    status, refused = await submit(papp, read("/b"), **{"Idempotency-Key": "k-1"})
    assert status == 409 and refused["error"]["code"] == "idempotency_key_reused"
    status, bad = await submit(papp, {**read("/c"), "quorum": 0})
    assert status == 400 and bad["error"]["details"][0]["field"] == "quorum"
    status, bad = await papp.api("POST", "/api/v1/approvals", data=b'{"summary": "x", "action": {"name": NaN}}',
                                 headers={"Content-Type": "application/json"})
    assert status == 400 and "not valid JSON" in bad["error"]["message"]
    _, listed = await papp.api("GET", "/api/v1/approvals")
    assert [r["id"] for r in listed["items"]] == [first[1]["id"]]


async def test_a_grant_from_another_process_applies_to_the_next_request(papp: App, db_url: str) -> None:
    _, before = await submit(papp, read("/srv/x"))
    assert before["decision"]["via"] == "policy"  # this process has now cached read_file's (empty) grant index
    other = await open_store(db_url)  # another replica's store on the same database
    try:
        grants = GrantStore(other)
        now = datetime.now(UTC)
        grant = Grant("grt_other_process", "read_file", {"path": FieldMatch("eq", "/srv/x")}, Scope.EVERYONE, None,
                      "U1", now - timedelta(seconds=1), expires_at=now + timedelta(hours=1))
        async with other.unit() as unit:
            await grants.add(unit, grant)
        _, granted = await submit(papp, read("/srv/x"))
        assert (granted["decision"]["via"], granted["decision"]["grant_id"]) == ("grant", "grt_other_process")
        assert await grants.revoke(grant.id, "U2", datetime.now(UTC))
        _, after = await submit(papp, read("/srv/x"))
        assert (after["decision"]["via"], after["decision"]["grant_id"]) == ("policy", None)
    finally:
        await other.close()
    assert papp.signoff is not None
    audit = await papp.signoff.store.audit_events(str(granted["id"]))
    assert [e.data.get("via") for e in audit if e.type == "decided"] == ["grant"]


async def test_concurrent_submissions_each_get_their_own_answer(papp: App) -> None:
    """Submissions that share a transaction (storage.group_commit) still succeed or fail on their own:
    a key taken by another request in the same moment refuses that one only."""
    bodies = [read(f"/f/{n}") for n in range(20)]
    answers = await asyncio.gather(*(submit(papp, b) for b in bodies),
                                   submit(papp, read("/same"), **{"Idempotency-Key": "k-race"}),
                                   submit(papp, read("/other"), **{"Idempotency-Key": "k-race"}))
    assert all(status == 201 and a["status"] == "approved" for status, a in answers[:20])
    assert [a["action"]["params"]["path"] for _, a in answers[:20]] == [f"/f/{n}" for n in range(20)]
    raced = sorted(status for status, _ in answers[20:])
    assert raced == [201, 409]
    assert papp.signoff is not None
    for _, a in answers[:20]:
        assert [e.type for e in await papp.signoff.store.audit_events(str(a["id"]))] == ["created", "decided"]
    _, listed = await papp.api("GET", "/api/v1/approvals?limit=200")
    assert len(listed["items"]) == 21
