"""App Home: bounded sections, valid views, buttons that work from Home, republished on change."""

from __future__ import annotations

import warnings
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from tests.support.outbox import settle
from tests.fakes.clock import FakeClock
from tests.support.app import App


def section_texts(view: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in view["blocks"] if b["type"] == "section"]


def headers(view: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in view["blocks"] if b["type"] == "header"]


def contexts(view: dict[str, Any]) -> list[str]:
    return [e["text"] for b in view["blocks"] if b["type"] == "context" for e in b["elements"]]


def valid_view(view: dict[str, Any]) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return View(**view).to_dict()  # raises SlackObjectFormationError on anything Slack would refuse


async def test_home_with_30_pending_shows_20_and_10_more(tapp: App, clock: FakeClock) -> None:
    app, slack = tapp, tapp.slack
    ids = []
    for n in range(30):
        req = await app.submit(summary=f"Refund order {n:02d}", approvers=["U1", "U2"], reminders=False,
                               escalation=False, timeout=False)
        ids.append(req["id"])
        clock.advance(minutes=1)  # oldest first must be visible
    await settle(app)

    response = await app.slack_client.event({"type": "app_home_opened", "user": "U1", "channel": "DU1", "tab": "home",
                                             "event_ts": "1700000000.000100"})
    assert response.status == 200
    [published] = await slack.wait_for("views.publish")
    await settle(app)
    assert published.args["user_id"] == "U1"
    view = slack.home_views["U1"]
    assert valid_view(published.args["view"]) and len(view["blocks"]) <= 100
    assert headers(view) == ["Signoff", "Waiting for you (30)", "Escalated to you (0)", "Decided by you recently (0)",
                            "Last 7 days"]
    items = [t for t in section_texts(view) if "Refund order" in t]
    assert len(items) == 20
    assert [t.split("|", 1)[1].split(">", 1)[0] for t in items] == [f"Refund order {n:02d}" for n in range(20)]
    assert "waiting 30m" in items[0] and "🟠 high risk" in items[0]
    assert items[0].startswith("*<https://fake-slack.test/archives/C1/p")  # a link to the card
    assert "… 10 more requests" in contexts(view)
    buttons = [e for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert {(b["action_id"], b["value"]) for b in buttons} >= {("signoff_approve", ids[0]), ("signoff_reject", ids[0])}

    # Approve from Home: a view container, no channel. The decision is recorded; Home is republished.
    publishes = len(slack.calls_to("views.publish"))
    response = await app.slack_client.block_action(user="U1", user_name="alice", action_id="signoff_approve",
                                                   value=ids[0], block_id=f"home:{ids[0]}", view_id=view["id"])
    assert response.status == 200
    _, decided = await app.api("GET", f"/api/v1/approvals/{ids[0]}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["decided_by"]["id"] == "U1"
    await slack.wait_for("views.publish", count=publishes + 1)
    await settle(app)
    view = slack.home_views["U1"]
    valid_view(view)
    assert headers(view)[1:] == ["Waiting for you (29)", "Escalated to you (0)", "Decided by you recently (1)",
                                 "Last 7 days"]
    assert "… 9 more requests" in contexts(view)
    assert any("✅ Approved" in c and "Refund order 00" in c for c in contexts(view))
    # A click from Home on a request someone else decided is answered by DM (Home has no channel).
    await app.click(ids[1], "U2", user_name="bob")
    await app.api("GET", f"/api/v1/approvals/{ids[1]}?wait=5")
    response = await app.slack_client.block_action(user="U1", action_id="signoff_approve", value=ids[1],
                                                   block_id=f"home:{ids[1]}", view_id=view["id"])
    dm = await slack.wait_for("chat.postMessage", count=31)
    assert dm[-1].args["channel"] == "U1" and "Already approved by <@U2>" in dm[-1].args["text"]

    # /signoff pending: the same list, ephemeral, in the ack.
    answer = await app.slack_client.command(user="U1", text="pending")
    assert answer.status == 200
    body = answer.json()
    assert body["response_type"] == "ephemeral" and body["text"] == "28 requests wait on you."
    assert len(body["blocks"]) <= 50
    for block in body["blocks"]:
        Block.parse(block).to_dict()  # type: ignore[union-attr]
    lines = [b["text"]["text"] for b in body["blocks"] if b["type"] == "section"]
    assert lines[0] == "*Waiting for you* (28)" and sum("Refund order" in t for t in lines) == 20
    assert "Refund order 02" in lines[1] and "… 8 more requests" in contexts(body)
    help_answer = await app.slack_client.command(user="U1", text="")
    assert "/signoff pending" in help_answer.json()["text"]
