"""Execution receipts (issue 37) through HTTP and signed Slack requests: an agent reports what ran,
the card's footer says so, the audit keeps it, and the record keeps proposal, approval and what ran
apart. One report per request; bad reports are refused with the field named and change nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import number_input
from signoff import AsyncSignoffClient, SignoffRequestError
from tests.approvals.batch_steps import approve_selected
from tests.support.app import App, start_app
from tests.support.outbox import settle, snapshot

TOKENS = "agent-a:token-aaaaaaaa:agent,agent-b:token-bbbbbbbb:agent"
A, B = "token-aaaaaaaa", "token-bbbbbbbb"


@pytest_asyncio.fixture
async def served(db_url: str, slack: SlackEmulator) -> AsyncIterator[App]:
    running = await start_app(db_url, slack, SIGNOFF_API_TOKENS=TOKENS)
    running.headers = {"Authorization": f"Bearer {A}"}
    try:
        yield running
    finally:
        await running.stop()


def shown(app: App, card: Any) -> str:
    return card.text + "\n" + json.dumps(card.blocks, ensure_ascii=False)


async def approved(app: App, *, edit_amount: str | None = None) -> str:
    """A refund request submitted by agent-a and approved in Slack by alice (optionally edited)."""
    body = await app.submit(action={"name": "refund", "params": {"to": "a@example.com", "amount": 40}},
                            approvers=["U1"])
    if edit_amount is None:
        await app.click(body["id"], "U1", user_name="alice")
    else:
        await app.click(body["id"], "U1", action="signoff_edit", user_name="alice")
        [opened] = await app.slack.wait_for("views.open")
        await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_edit",
                                               private_metadata=opened.args["view"]["private_metadata"],
                                               values={"p:amount": {"value": number_input(edit_amount)}})
    _, decided = await app.api("GET", f"/api/v1/approvals/{body['id']}?wait=10")
    assert decided["status"] == "approved", decided
    await settle(app)
    return str(body["id"])


async def audit(app: App, request_id: str) -> list[Any]:
    assert app.signoff is not None
    return list(await app.signoff.store.audit_events(request_id))


async def test_a_reported_run_reaches_the_card_and_the_audit_apart_from_proposal_and_approval(served: App) -> None:
    request_id = await approved(served, edit_amount="45")
    status, body = await served.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["outcome_status"] == "not_reported" and body["outcome"] is None  # approved, nobody said what ran

    async with AsyncSignoffClient(served.url, A) as client:
        recorded = await client.report_outcome(request_id, "ran", params={"to": "a@example.com", "amount": 45},
                                               result={"refund_id": "r_123"})
    await settle(served)
    # Three things apart: what the agent proposed, what the person approved, what ran.
    assert recorded["action"]["params"]["amount"] == 40
    assert recorded["decision"]["params"]["amount"] == 45
    assert recorded["outcome"]["params"]["amount"] == 45 and recorded["outcome"]["same_params"] is True
    assert recorded["outcome_status"] == "ran" and recorded["outcome"]["by"] == "agent-a"
    assert recorded["outcome"]["result"] == {"refund_id": "r_123"}

    card = await served.card(request_id)
    text = shown(served, card)
    assert "with the approved parameters" in text and "r_123" in text, text
    assert "different" not in text
    [ran] = [e for e in await audit(served, request_id) if e.type == "run_ran"]
    assert ran.data["params"] == {"to": "a@example.com", "amount": 45} and ran.data["by"] == "agent-a"


async def test_a_run_with_other_parameters_is_flagged_and_a_second_different_report_is_refused(served: App) -> None:
    request_id = await approved(served)
    path = f"/api/v1/approvals/{request_id}/outcome"
    report = {"status": "ran", "params": {"to": "a@example.com", "amount": 400}}
    status, body = await served.api("POST", path, json=report)
    assert status == 201, body
    assert body["outcome"]["same_params"] is False
    await settle(served)
    text = shown(served, await served.card(request_id))
    assert "with different parameters" in text and "approved 40 → ran 400" in text, text

    again, same = await served.api("POST", path, json=report)  # a retry: answered as it was
    assert again == 200 and same["outcome"] == body["outcome"]
    before = await snapshot(served, request_id)
    refused, error = await served.api("POST", path, json={"status": "failed", "error": "boom"})
    assert refused == 409 and error["error"]["code"] == "outcome_already_reported", error
    assert error["error"]["details"][0]["recorded"]["status"] == "ran"
    assert await snapshot(served, request_id) == before
    card_updates = [c for c in served.slack.calls_to("chat.update") if "different parameters" in json.dumps(c.args)]
    assert len(card_updates) == 1  # the footer is written once, whatever repeats


async def test_only_the_submitting_token_reports_and_only_on_an_approval(served: App) -> None:
    request_id = await approved(served)
    other = {"Authorization": f"Bearer {B}"}
    status, body = await served.api("POST", f"/api/v1/approvals/{request_id}/outcome", json={"status": "ran"},
                                    headers=other)
    assert status == 404, body  # another agent's request does not exist for it
    pending = await served.submit(approvers=["U1"])
    status, body = await served.api("POST", f"/api/v1/approvals/{pending['id']}/outcome", json={"status": "ran"})
    assert status == 409 and "not approved" in body["error"]["message"], body
    before = await snapshot(served, request_id)
    for bad, field in (({"status": "maybe"}, "status"), ({"status": "ran", "result": "x" * 5000}, "result"),
                       ({"status": "ran", "error": "e" * 2000}, "error"), ({"status": "ran", "extra": 1}, "extra")):
        status, body = await served.api("POST", f"/api/v1/approvals/{request_id}/outcome", json=bad)
        assert status == 400 and field in json.dumps(body), (bad, body)
    status, body = await served.api("POST", f"/api/v1/approvals/{request_id}/outcome", data=b"{" + b" " * 70_000)
    assert status == 400 and "64 KB" in body["error"]["message"], body
    assert await snapshot(served, request_id) == before


async def test_a_failure_and_a_skip_say_so_on_the_card(served: App) -> None:
    failed_id, skipped_id = await approved(served), await approved(served)
    async with AsyncSignoffClient(served.url, A) as client:
        await client.report_outcome(failed_id, "failed", error="card declined: insufficient funds")
        await client.report_outcome(skipped_id, "skipped", error="the customer cancelled first")
        with pytest.raises(SignoffRequestError) as refused:
            await client.report_outcome(skipped_id, "ran")
    assert refused.value.error_code == "outcome_already_reported"
    await settle(served)
    failed = shown(served, await served.card(failed_id))
    assert "then failed when run" in failed and "insufficient funds" in failed, failed
    skipped = shown(served, await served.card(skipped_id))
    assert "Not run" in skipped and "the customer cancelled first" in skipped, skipped
    assert [e.type for e in await audit(served, failed_id)].count("run_failed") == 1


async def test_an_approval_nobody_reported_on_is_listed_and_shown_as_such(served: App) -> None:
    quiet, reported = await approved(served), await approved(served)
    status, _ = await served.api("POST", f"/api/v1/approvals/{reported}/outcome", json={"status": "ran"})
    assert status == 201
    status, listing = await served.api("GET", "/api/v1/approvals?status=approved&outcome=not_reported")
    assert status == 200 and [i["id"] for i in listing["items"]] == [quiet], listing
    assert listing["items"][0]["outcome_status"] == "not_reported"
    status, listing = await served.api("GET", "/api/v1/approvals?outcome=ran")
    assert [i["id"] for i in listing["items"]] == [reported]
    status, body = await served.api("GET", "/api/v1/approvals?outcome=whatever")
    assert status == 400 and "not_reported" in body["error"]["message"]

    response = await served.slack_client.event({"type": "app_home_opened", "user": "U1", "channel": "DU1",
                                                "tab": "home", "event_ts": "1700000000.000100"})
    assert response.status == 200
    await served.slack.wait_for("views.publish")
    await settle(served)
    home = json.dumps(served.slack.home_views["U1"]["blocks"], ensure_ascii=False)
    assert "Approved, no outcome reported" in home and "Approved, ran" in home, home


async def test_a_batch_submitted_with_item_keys_takes_a_receipt_per_item_and_duplicate_keys_are_refused(
        served: App) -> None:
    items = [{"name": "send_email", "params": {"to": "a@example.com"}, "key": "call_1"},
             {"name": "send_email", "params": {"to": "b@example.com"}, "key": "call_2"}]
    status, refused = await served.api("POST", "/api/v1/approvals", json={
        "summary": "Two emails", "channel": "C1", "approvers": ["U1"], "items": [items[0], {**items[1], "key": "call_1"}]})
    assert status == 400 and "unique" in json.dumps(refused), refused
    _, listing = await served.api("GET", "/api/v1/approvals")
    assert listing["items"] == []  # nothing stored
    status, body = await served.api("POST", "/api/v1/approvals", json={
        "summary": "Two emails", "channel": "C1", "approvers": ["U1"], "items": items})
    assert status == 201 and [i["key"] for i in body["items"]] == ["call_1", "call_2"], body
    await approve_selected(served, body["id"], [0])  # the second is rejected
    _, decided = await served.api("GET", f"/api/v1/approvals/{body['id']}?wait=10")
    assert [i["key"] for i in decided["decision"]["items"]] == ["call_1", "call_2"]
    status, ran = await served.api("POST", f"/api/v1/approvals/{body['id']}/outcome",
                                   json={"status": "ran", "params": {"to": "a@example.com"}, "item": "call_1"})
    assert status == 201 and ran["outcome"]["items"]["call_1"]["status"] == "ran"
    status, _ = await served.api("POST", f"/api/v1/approvals/{body['id']}/outcome",
                                 json={"status": "ran", "item": "call_2"})
    assert status == 409  # rejected: nothing to report
