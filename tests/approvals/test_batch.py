"""Batches over real HTTP: one card, a checkbox per item, per-item outcomes, paging within Slack's limits."""

from __future__ import annotations

import json
import warnings
from typing import Any

from slack_sdk.models.blocks import Block

from bot.domain.params_hash import params_sha256
from tests.support.outbox import drain, snapshot
from tests.agent.conftest import agent, model  # noqa: F401 - fixtures for the runner scenario
from tests.agent.helpers import AgentApp
from tests.approvals.duty_steps import ephemerals_to
from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import checkboxes, plain_input
from tests.support.app import App, approval_body
from tests.support.app import submit_body

EMAIL_SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
                "required": ["to", "subject"]}


def batch_body(n: int, **overrides: Any) -> dict[str, Any]:
    items = [{"name": "send_email", "params": {"to": f"c{i}@example.com", "subject": f"Refund {i}"},
              "params_schema": EMAIL_SCHEMA,
              "preview": {"kind": "email", "to": [f"c{i}@example.com"], "subject": f"Refund {i}", "body": "Hi"}}
             for i in range(n)]
    body = approval_body(items=items, summary=f"Send {n} refund emails", **overrides)
    body.pop("action")
    body.pop("preview")
    return body


async def submit_batch(app: App, n: int, **overrides: Any) -> dict[str, Any]:
    return await submit_body(app, batch_body(n, **overrides))


def ticked(indexes: list[int]) -> dict[str, Any]:
    return {f"item:{i}": {"signoff_item_pick": checkboxes(["approve"])} for i in indexes}


def valid(blocks: list[dict[str, Any]]) -> None:
    """What Slack would accept: slack_sdk's models (recursively) and at most 50 blocks per message."""
    assert len(blocks) <= 50
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for block in blocks:
            parsed = Block.parse(block)
            assert parsed is not None, block
            parsed.to_dict()


async def test_batch_of_twelve_ten_approved_two_rejected_per_item_in_api_and_card(app: App) -> None:
    req = await submit_batch(app, 12)
    assert req["action"]["name"] == "batch" and len(req["items"]) == 12
    card = await app.card(req["id"])
    valid(card.blocks)
    shown = json.dumps(card.blocks, ensure_ascii=False)
    assert all(f"c{i}@example.com" in shown for i in range(12))
    assert shown.count('"signoff_item_pick"') == 12 and shown.count('"signoff_item_edit"') == 12
    assert "Approve selected" in shown and "Reject all" in shown

    approve = [i for i in range(12) if i not in (3, 7)]
    response = await app.slack_client.block_action(
        user="U1", user_name="alice", action_id="signoff_batch_approve", value=req["id"], block_id="batch:0",
        channel=card.channel, message_ts=card.ts, state_values=ticked(approve))
    assert response.status == 200
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved"
    items = body["decision"]["items"]
    assert [i["outcome"] for i in items] == ["rejected" if n in (3, 7) else "approved" for n in range(12)]
    assert all(i["params"] == {"to": f"c{n}@example.com", "subject": f"Refund {n}"} for n, i in enumerate(items))
    assert all(i["params_sha256"] == params_sha256(i["params"]) for i in items)
    assert body["decision"]["decided_by"]["id"] == "U1"
    await drain(app)
    final = app.slack.messages[(card.channel, card.ts)]
    valid(final.blocks)
    lines = [b["text"]["text"] for b in final.blocks if b["type"] == "section" and "@example.com" in b["text"]["text"]]
    assert len(lines) == 12
    assert [line.split(" ", 1)[0] for line in lines] == ["❌" if n in (3, 7) else "✅" for n in range(12)]
    assert not any(b["type"] == "actions" for b in final.blocks)


async def test_edit_one_item_then_approve_and_reject_all(app: App) -> None:
    req = await submit_batch(app, 3)
    card = await app.card(req["id"])
    await app.slack_client.block_action(user="U1", action_id="signoff_item_edit", value=req["id"],
                                        block_id="item:1", channel=card.channel, message_ts=card.ts)
    [opened] = await app.slack.wait_for("views.open")
    view = opened.args["view"]
    assert view["callback_id"] == "signoff_batch_edit"
    bad = await app.slack_client.view_submission(user="U1", callback_id="signoff_batch_edit",
                                                 private_metadata=view["private_metadata"],
                                                 values={"p:to": {"value": plain_input(None)},
                                                         "p:subject": {"value": plain_input("x")}})
    assert bad.json()["response_action"] == "errors"  # `to` is required by the item's schema
    ok = await app.slack_client.view_submission(user="U1", callback_id="signoff_batch_edit",
                                                private_metadata=view["private_metadata"],
                                                values={"p:to": {"value": plain_input("c1@example.com")},
                                                        "p:subject": {"value": plain_input("Refund of $45")}})
    assert ok.status == 200 and ok.text in ("", "{}")
    await app.slack.wait_for("chat.update")  # the edit is stored, then the card shows it
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] == "pending"
    assert body["items"][1]["changes"] == [{"field": "subject", "from": "Refund 1", "to": "Refund of $45"}]
    await drain(app)
    assert "(edited: subject)" in json.dumps(app.slack.messages[(card.channel, card.ts)].blocks, ensure_ascii=False)

    await app.slack_client.block_action(user="U2", action_id="signoff_batch_approve", value=req["id"],
                                        block_id="batch:0", channel=card.channel, message_ts=card.ts,
                                        state_values=ticked([1]))
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    items = body["decision"]["items"]
    assert [i["outcome"] for i in items] == ["rejected", "approved", "rejected"]
    assert items[1]["params"]["subject"] == "Refund of $45" and items[1]["changes"]

    # Reject all on another batch: every item rejected, with the reason.
    other = await submit_batch(app, 2)
    other_card = await app.card(other["id"])
    await app.slack_client.block_action(user="U1", action_id="signoff_batch_reject", value=other["id"],
                                        block_id="batch:0", channel=other_card.channel, message_ts=other_card.ts)
    [_, opened] = await app.slack.wait_for("views.open", count=2)
    await app.slack_client.view_submission(user="U1", callback_id="signoff_batch_reject",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"reason": {"value": plain_input("Not today")}})
    _, body = await app.api("GET", f"/api/v1/approvals/{other['id']}?wait=5")
    assert body["status"] == "rejected" and body["decision"]["comment"] == "Not today"
    assert [i["outcome"] for i in body["decision"]["items"]] == ["rejected", "rejected"]


async def test_batch_of_sixty_is_paged_within_fifty_blocks_per_message_nothing_dropped(app: App) -> None:
    req = await submit_batch(app, 60)
    card = await app.card(req["id"])
    await drain(app)
    replies = app.slack.channel_messages(card.channel, thread_ts=card.ts)
    pages = [card, *[m for m in replies if (m.metadata or {}).get("event_type") == "signoff_card_page"]]
    assert len(pages) == 3  # 20 actions a message
    for message in pages:
        valid(message.blocks)
    shown = "\n".join(json.dumps(m.blocks, ensure_ascii=False) for m in pages)
    assert all(f"{i + 1}. send_email · to: c{i}@example.com, subject: Refund {i}" in shown for i in range(60))
    assert shown.count('"signoff_item_pick"') == 60

    # Each page decides its own items; the request is decided when the last page is.
    for number, message in enumerate(pages):
        first = number * 20
        response = await app.slack_client.block_action(
            user="U1", action_id="signoff_batch_approve", value=req["id"], block_id=f"batch:{number}",
            channel=message.channel, message_ts=message.ts, state_values=ticked(list(range(first, first + 20, 2))))
        assert response.status == 200
        if number < 2:
            await app.slack.wait_for("chat.postEphemeral", count=number + 1)
            _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
            assert body["status"] == "pending"
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved"
    assert [i["outcome"] for i in body["decision"]["items"]] == ["approved", "rejected"] * 30
    await drain(app)
    for message in pages:
        final = app.slack.messages[(message.channel, message.ts)]
        valid(final.blocks)
        assert not any(b["type"] == "actions" for b in final.blocks)
    assert "Recorded. 40 more actions wait" in ephemerals_to(app, "U1")[0]


async def test_batch_requests_refuse_what_they_cannot_do(app: App) -> None:
    for overrides, field in [({"quorum": 2}, "quorum"), ({"confirm": "x"}, "confirm"), ({"risk": "critical"}, "critical"),
                             ({"items": []}, "items")]:
        body = batch_body(2)
        body.update(overrides)
        status, answer = await app.api("POST", "/api/v1/approvals", json=body)
        assert status == 400 and field in answer["error"]["message"], (overrides, answer)
    both = approval_body(items=batch_body(1)["items"])
    status, answer = await app.api("POST", "/api/v1/approvals", json=both)
    assert status == 400 and "either `action`" in answer["error"]["message"]
    _, listed = await app.api("GET", "/api/v1/approvals")
    assert listed["items"] == []


async def test_a_click_from_someone_else_or_on_a_foreign_message_writes_nothing(app: App) -> None:
    req = await submit_batch(app, 2, approvers=["U1"])
    card = await app.card(req["id"])
    await drain(app)
    before = await snapshot(app, req["id"])
    await app.slack_client.block_action(user="UOUT", action_id="signoff_batch_approve", value=req["id"],
                                        block_id="batch:0", channel=card.channel, message_ts=card.ts,
                                        state_values=ticked([0, 1]))
    await app.slack_client.block_action(user="U1", action_id="signoff_batch_approve", value=req["id"],
                                        block_id="batch:7", channel=card.channel, message_ts=card.ts,
                                        state_values=ticked([0, 1]))
    await app.slack.wait_for("chat.postEphemeral", count=2)
    await drain(app)
    assert "not one of the approvers" in ephemerals_to(app, "UOUT")[0]
    assert "does not belong" in ephemerals_to(app, "U1")[0]
    assert await snapshot(app, req["id"]) == before


async def test_the_runners_three_parallel_tool_calls_make_one_card(agent: AgentApp) -> None:
    emails = [{"to": f"c{i}@example.com", "subject": "Refund", "body": "Hello"} for i in range(3)]
    agent.model.script(
        message(*[tool_use("send_email", e, id=f"toolu_{i}") for i, e in enumerate(emails)]),
        message(text("Two sent, one held back.")),
    )
    run = await agent.start("Email the three customers")
    calls = await agent.waiting_calls(run["id"], count=3)
    assert len({c["request_id"] for c in calls}) == 1
    request_id = calls[0]["request_id"]
    card = await agent.app.card(request_id)
    _, req = await agent.app.api("GET", f"/api/v1/approvals/{request_id}")
    assert [i["key"] for i in req["items"]] == ["toolu_0", "toolu_1", "toolu_2"]
    cards = [c for c in agent.slack.calls_to("chat.postMessage") if "signoff_card" in json.dumps(c.args.get("metadata"))]
    assert len(cards) == 1
    valid(card.blocks)

    await agent.app.slack_client.block_action(
        user="U1", user_name="alice", action_id="signoff_batch_approve", value=request_id, block_id="batch:0",
        channel=card.channel, message_ts=card.ts, state_values=ticked([0, 2]))
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    results = [b for b in agent.model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_0", "toolu_1", "toolu_2"]
    assert [bool(r.get("is_error")) for r in results] == [False, True, False]
    sent = sorted(p.read_text() for p in agent.emails())
    assert len(sent) == 2 and any("c0@example.com" in m for m in sent) and any("c2@example.com" in m for m in sent)


def test_every_page_of_the_largest_batch_stays_within_slacks_limits_and_shows_every_item() -> None:
    from datetime import UTC, datetime

    from bot.domain.batch import MAX_ITEMS
    from bot.domain.model import Action, Actor, Item, Kind, Outcome, Request, Risk, Status
    from bot.slack.batch_blocks import batch_page, page_count
    from bot.slack.blocks import TOTAL_TEXT_BUDGET
    from bot.slack.previews import text_length

    now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    params = {f"field_{k}": "<!channel> " + "x" * 400 for k in range(12)}
    items = tuple(Item(Action("send_email_" + "y" * 150, params), key=f"toolu_{i}") for i in range(MAX_ITEMS))
    pending = Request(id="apr_01jf0000000000000000000000", kind=Kind.APPROVAL, status=Status.PENDING,
                      action=Action("batch", {}), summary="s" * 3000, risk=Risk.HIGH, channel="C1",
                      created_at=now, updated_at=now, context="c" * 20000, items=items, requester_user="U1",
                      requester_may_approve=False)
    half = tuple(i.evolve(outcome=Outcome.APPROVED, decided_by=Actor("U2")) if n % 2 else i
                 for n, i in enumerate(items))
    decided = pending.evolve(items=tuple(i.evolve(outcome=i.outcome or Outcome.REJECTED) for i in half))
    for request in (pending, pending.evolve(items=half), decided):
        shown = []
        for page in range(page_count(request)):
            message = batch_page(request, page, now=now)
            valid(message["blocks"])
            assert text_length(message["blocks"]) <= TOTAL_TEXT_BUDGET
            assert "<!channel>" not in json.dumps(message, ensure_ascii=False)  # agent text is neutralised
            shown += [b["text"]["text"] for b in message["blocks"] if b["type"] == "section"
                      and "send_email_" in b["text"]["text"]]
        assert len(shown) == MAX_ITEMS  # none dropped
        assert [s.lstrip("✅❌ ").split(".", 1)[0] for s in shown] == [str(n + 1) for n in range(MAX_ITEMS)]
