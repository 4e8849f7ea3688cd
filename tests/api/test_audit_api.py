"""GET /api/v1/audit (issue 37): admin tokens only; oldest first, paged with a cursor; filters by time,
tool, person and outcome; rows show their chain position and hash once sealed."""

from __future__ import annotations

from typing import Any

import pytest

from bot.approvals.audit import AuditLog
from tests.support.app import App
from tests.support.outbox import drain

ADMIN, AGENT = "tok-audit-admin", "tok-audit-agent"


# The harness's app, with an admin and an agent token; its client is the admin.
pytestmark = pytest.mark.settings(token=ADMIN, SIGNOFF_API_TOKENS=f"ops:{ADMIN}:admin,bot:{AGENT}:agent")


async def audit(app: App, query: str = "", token: str = ADMIN) -> tuple[int, Any]:
    return await app.api("GET", f"/api/v1/audit{query}", headers={"Authorization": f"Bearer {token}"})


async def everything(app: App, query: str, limit: int) -> list[dict[str, Any]]:
    """Every page of `query`, following next_cursor."""
    found: list[dict[str, Any]] = []
    cursor = ""
    for _ in range(100):
        status, page = await audit(app, f"?limit={limit}{query}{cursor}")
        assert status == 200, page
        assert len(page["items"]) <= limit
        found += page["items"]
        if page["next_cursor"] is None:
            return found
        cursor = f"&cursor={page['next_cursor']}"
    raise AssertionError("the pages never ended")


async def test_the_audit_log_is_for_admin_tokens_only(app: App) -> None:
    await app.submit()
    status, body = await audit(app, token=AGENT)
    assert status == 403 and body["error"]["code"] == "forbidden"
    status, body = await app.api("GET", "/api/v1/audit", auth=False)
    assert status == 401
    status, body = await audit(app)
    assert status == 200 and body["items"]


async def test_filters_and_paging(app: App) -> None:
    emails = [await app.submit(channel="C1", approvers=["U1", "U2"]) for _ in range(3)]
    deletes = [await app.submit(channel="C1", approvers=["U1", "U2"],
                                action={"name": "delete_file", "params": {"path": f"/tmp/{n}"}}) for n in range(2)]
    await app.click(emails[0]["id"], "U1", user_name="alice")
    await app.click(emails[1]["id"], "U2", user_name="bob")
    await app.click(deletes[0]["id"], "U2", user_name="bob")
    await app.api("POST", f"/api/v1/approvals/{deletes[1]['id']}/cancel", json={"reason": "not now"})
    await drain(app)
    await AuditLog(app.signoff.store).seal()  # type: ignore[union-attr]

    rows = await everything(app, "", limit=2)
    ids = [r["id"] for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # oldest first, each row once across pages
    assert all(r["seq"] is not None and len(r["hash"]) == 64 for r in rows)
    assert {r["request_id"] for r in rows} >= {x["id"] for x in emails + deletes}

    by_bob = await everything(app, "&person=U2&type=decided", limit=1)
    assert {r["request_id"] for r in by_bob} == {emails[1]["id"], deletes[0]["id"]}
    deleted = await everything(app, "&tool=delete_file", limit=50)
    assert {r["request_id"] for r in deleted} == {x["id"] for x in deletes}
    assert all(r["tool"] == "delete_file" for r in deleted)
    cancelled = await everything(app, "&outcome=cancelled", limit=50)
    assert [r["request_id"] for r in cancelled] == [deletes[1]["id"]]
    approved_deletes = await everything(app, "&outcome=approved&tool=delete_file", limit=50)
    assert [r["request_id"] for r in approved_deletes] == [deletes[0]["id"]]

    middle = rows[len(rows) // 2]["at"]
    later = await everything(app, f"&since={middle}", limit=50)
    earlier = await everything(app, f"&until={middle}", limit=50)
    assert later and earlier and len(later) + len(earlier) == len(rows)
    assert all(r["at"] >= middle for r in later) and all(r["at"] < middle for r in earlier)


async def test_bad_filters_are_a_clear_400(app: App) -> None:
    for query, words in (("?since=yesterday", "since must be an ISO 8601 time"),
                         ("?until=2026-12-01T00:00:00", "time zone"),
                         ("?cursor=%%%", "cursor"), ("?limit=0", "limit"), ("?tool=" + "x" * 201, "tool")):
        status, body = await audit(app, query)
        assert status == 400 and words in body["error"]["message"], (query, body)
