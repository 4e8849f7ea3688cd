"""Suggestions from the decision record in Slack, over signed requests on a clock the test moves: App Home and
the weekly digest show each with exactly the grant (allow or deny) it would add; one tap makes exactly that
grant, audited with the person's id, once however many taps race; an accepted deny rejects the next matching
request at once on every replica, at every tier, and is listed and revocable like a grant; an allow at a
critical tier and non-approvers are refused with nothing written; Dismiss hides one for that person."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest_asyncio

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import plain_input
from tests.approvals.timer_steps import tick
from tests.fakes.clock import FakeClock
from tests.support.app import App, start_app
from tests.support.outbox import settle

POLICY = """\
default_tier: high
tiers:
  high:
    approvers: [U1, U2]
rules:
  - name: wipes-are-critical
    tool: wipe_disk
    tier: critical
"""
CRITICAL = POLICY.replace("tool: wipe_disk", "tool: send_email")
ENV = {"SIGNOFF_SWEEP_SECONDS": "3600", "SIGNOFF_DIGEST_CHANNELS": "C1", "SIGNOFF_SUGGEST_MIN_APPROVALS": "4",
       "SIGNOFF_SUGGEST_MIN_PEOPLE": "2", "SIGNOFF_SUGGEST_MIN_REJECTIONS": "2", "SIGNOFF_SUGGEST_GRANT_DAYS": "7"}
KEY = '["allow","send_email",{"to":"*@example.com"},"C1"]'
DENY_KEY = '["deny","db_exec",{},"C1"]'


@pytest_asyncio.fixture
async def happ(db_url: str, slack: SlackEmulator, tmp_path: Path) -> AsyncIterator[tuple[App, FakeClock, Path]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    clock = FakeClock()  # Monday 2030-01-07 09:00 UTC
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_POLICY=str(policy), **ENV)
    try:
        yield running, clock, policy
    finally:
        await running.stop()


async def decide(app: App, clock: FakeClock, tool: str, params: dict[str, Any], user: str, action: str) -> None:
    made = await app.submit(action={"name": tool, "params": params}, preview=None)
    forms = len(app.slack.calls_to("views.open"))
    await app.click(made["id"], user, action)
    if action == "signoff_reject":  # the reason form
        opened = (await app.slack.wait_for("views.open", count=forms + 1))[-1]
        await app.slack_client.view_submission(user=user, callback_id="signoff_reject",
                                               private_metadata=opened.args["view"]["private_metadata"],
                                               values={"reason": {"value": plain_input("not on prod")}})
    _, body = await app.api("GET", f"/api/v1/approvals/{made['id']}?wait=5")
    assert body["status"] != "pending", body
    await tick(app, clock, hours=1)


async def history(app: App, clock: FakeClock) -> None:
    """Four refund emails to example.com approved by U1 and U2; two db_exec calls rejected."""
    for n in range(4):
        await decide(app, clock, "send_email", {"to": f"c{n}@example.com", "subject": f"Refund {n}"},
                     ["U1", "U2"][n % 2], "signoff_approve")
    for n in range(2):
        await decide(app, clock, "db_exec", {"statement": f"DELETE FROM t{n}"}, "U1", "signoff_reject")


async def home(app: App, user: str) -> dict[str, Any]:
    publishes = len(app.slack.calls_to("views.publish"))
    await app.slack_client.event({"type": "app_home_opened", "user": user, "tab": "home"})
    await app.slack.wait_for("views.publish", count=publishes + 1)
    await settle(app)
    return app.slack.home_views[user]


def buttons(blocks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["action_id"], e.get("value", "")) for b in blocks if b["type"] == "actions" for e in b["elements"]
            if e["action_id"].startswith("signoff_history_")]


def notes_to(app: App, user: str) -> list[str]:
    """What `user` was told: ephemeral notes in a channel, or DMs (a tap on Home has no channel)."""
    return [str(c.args["text"]) for c in app.slack.calls
            if (c.method == "chat.postEphemeral" and c.args.get("user") == user)
            or (c.method == "chat.postMessage" and c.args.get("channel") == user)]


async def told(app: App, user: str, count: int) -> list[str]:
    for _ in range(500):  # the note follows the ack
        found = notes_to(app, user)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"{user} was told {notes_to(app, user)}, not {count} notes")


async def tap(app: App, user: str, action: str, key: str, **where: Any) -> str:
    before = len(notes_to(app, user))
    response = await app.slack_client.block_action(user=user, action_id=f"signoff_history_{action}", value=key,
                                                   block_id="history", **where)
    assert response.status == 200
    return (await told(app, user, before + 1))[-1]


async def grants(app: App) -> list[dict[str, Any]]:
    _, body = await app.api("GET", "/api/v1/grants")
    return list(body["items"])


async def test_home_offers_the_exact_grant_one_tap_makes_it_once_and_the_next_call_needs_no_card(
        happ: tuple[App, FakeClock, Path]) -> None:
    app, clock, _ = happ
    await history(app, clock)
    view = await home(app, "U1")
    text = json.dumps(view["blocks"], ensure_ascii=False)
    assert ("💡 send_email to *@example.com: approved 4 times by 2 people in 14 days, never rejected, never edited: "
            "allow it?") in text
    assert "Accept adds a grant: send_email with to matches *@example.com (other parameters: any)" in text
    assert "in <#C1> · for 7 days · tier high" in text
    assert ("signoff_history_accept", KEY) in buttons(view["blocks"])
    assert ("signoff_history_accept", DENY_KEY) in buttons(view["blocks"])  # a deny is one tap too (below)
    assert buttons((await home(app, "U3"))["blocks"]) == []  # not an approver of the tier: nothing offered

    # Not an approver: refused, nothing written.
    assert "Only approvers of `send_email`'s tier (high)" in await tap(app, "U3", "accept", KEY, view_id=view["id"])
    assert await grants(app) == []

    # A double tap (two signed requests at once): one grant, exactly the shown one, audited with U1.
    before = len(notes_to(app, "U1"))
    await asyncio.gather(*(app.slack_client.block_action(user="U1", action_id="signoff_history_accept", value=KEY,
                                                         block_id="history", view_id=view["id"]) for _ in range(2)))
    both = (await told(app, "U1", before + 2))[before:]
    assert sorted(t.split(",")[0] for t in both) == ["Accepted", "You had already accepted this suggestion"], both
    [grant] = await grants(app)
    assert (grant["tool"], grant["match"], grant["scope"], grant["scope_value"]) == (
        "send_email", {"to": {"op": "glob", "value": "*@example.com"}}, "channel", "C1")
    assert grant["any_other_params"] is True and grant["created_by"] == "U1" and grant["request_id"] is None
    assert datetime.fromisoformat(grant["expires_at"]) - datetime.fromisoformat(grant["created_at"]) == timedelta(days=7)
    assert app.signoff is not None
    audit = await app.signoff.store.audit_events(grant["id"])
    assert [(e.type, e.actor) for e in audit] == [("grant_created", "U1"), ("suggestion_accepted", "U1")]
    assert audit[1].data["rule"] == {"name": "allow-send-email-example-com", "tool": "send_email",
                                     "params": {"to": {"glob": "*@example.com"}}, "effect": "allow"}
    # Another approver's later tap (from the digest's channel): told who accepted it, nothing more written.
    assert "<@U1> had already accepted" in await tap(app, "U2", "accept", KEY, channel="C1", message_ts="1.1")
    assert len(await grants(app)) == 1

    # Accepted: it leaves Home; the next matching email (other subject, an extra parameter) needs no card.
    assert ("signoff_history_accept", KEY) not in buttons((await home(app, "U1"))["blocks"])
    made = await app.submit(action={"name": "send_email", "params": {"to": "new@example.com", "subject": "Hi",
                                                                      "cc": "x@y.org"}}, preview=None)
    assert made["status"] == "approved" and made["decision"]["grant_id"] == grant["id"]
    other = await app.submit(action={"name": "send_email", "params": {"to": "new@other.org"}}, preview=None)
    assert other["status"] == "pending"
    # In another channel the grant does not apply (the evidence came from C1 only).
    elsewhere = await app.submit(action={"name": "send_email", "params": {"to": "a@example.com"}}, preview=None,
                                 channel="C9")
    assert elsewhere["status"] == "pending"


async def test_a_tool_now_critical_is_neither_offered_nor_accepted(happ: tuple[App, FakeClock, Path]) -> None:
    app, clock, policy = happ
    await history(app, clock)
    view = await home(app, "U1")
    assert ("signoff_history_accept", KEY) in buttons(view["blocks"])
    policy.write_text(CRITICAL)  # the operator puts send_email at the critical tier
    assert app.signoff is not None and app.signoff.policy is not None and app.signoff.policy.reload()
    # The button already on screen: refused, nothing written.
    assert "`send_email` is at the critical tier" in await tap(app, "U1", "accept", KEY, view_id=view["id"])
    assert await grants(app) == []
    assert ("signoff_history_accept", KEY) not in buttons((await home(app, "U1"))["blocks"])


async def test_the_weekly_digest_shows_them_and_dismiss_hides_one_for_that_person(
        happ: tuple[App, FakeClock, Path]) -> None:
    app, clock, _ = happ
    await history(app, clock)
    await tick(app, clock, days=7)  # Monday 09:00: the digest falls due
    [digest] = [c for c in app.slack.calls_to("chat.postMessage") if "Weekly approvals digest" in c.args["text"]]
    assert digest.args["channel"] == "C1"
    text = json.dumps(digest.args["blocks"], ensure_ascii=False)
    assert "Accept adds a grant: send_email with to matches *@example.com (other parameters: any)" in text
    assert "db_exec: rejected 2 of 2 in 14 days: deny it?" in text
    assert "Accept adds a deny: denies db_exec with any parameters" in text
    assert buttons(digest.args["blocks"]) == [("signoff_history_accept", KEY), ("signoff_history_dismiss", KEY),
                                              ("signoff_history_accept", DENY_KEY), ("signoff_history_dismiss", DENY_KEY)]

    note = await tap(app, "U2", "dismiss", KEY, channel="C1", message_ts=digest.response["ts"])
    assert "Dismissed" in note
    assert ("signoff_history_accept", KEY) not in buttons((await home(app, "U2"))["blocks"])  # hidden for U2
    assert ("signoff_history_accept", KEY) in buttons((await home(app, "U1"))["blocks"])  # still there for U1
    assert await grants(app) == []  # dismissing writes no grant
    # From the digest, an approver accepts: the channel's grant.
    assert "Accepted, as grant" in await tap(app, "U1", "accept", KEY, channel="C1", message_ts=digest.response["ts"])
    assert [g["scope_value"] for g in await grants(app)] == ["C1"]


async def test_a_deny_is_one_tap_and_rejects_the_next_matching_request_on_every_replica_until_revoked(
        happ: tuple[App, FakeClock, Path], db_url: str, slack: SlackEmulator) -> None:
    app, clock, policy = happ
    await history(app, clock)
    view = await home(app, "U1")
    text = json.dumps(view["blocks"], ensure_ascii=False)
    assert "💡 db_exec: rejected 2 of 2 in 14 days: deny it?" in text
    assert "Accept adds a deny: denies db_exec with any parameters" in text and "in <#C1> · for 7 days" in text
    # Another replica on the same database, which has just read db_exec's grants (none) for a request.
    other = await start_app(db_url, slack, clock=clock, SIGNOFF_POLICY=str(policy), **ENV)
    try:
        before = await other.submit(action={"name": "db_exec", "params": {"statement": "DELETE FROM a"}}, preview=None)
        assert before["status"] == "pending"

        assert "Only approvers of `db_exec`'s tier (high)" in await tap(app, "U3", "accept", DENY_KEY,
                                                                       view_id=view["id"])
        assert await grants(app) == []  # refused: nothing written
        # U1 and U2 tap at once (signed requests): one deny, exactly the shown one, audited with whoever made it.
        notes = {u: len(notes_to(app, u)) for u in ("U1", "U2")}
        await asyncio.gather(*(app.slack_client.block_action(user=u, action_id="signoff_history_accept",
                                                             value=DENY_KEY, block_id="history", view_id=view["id"])
                               for u in ("U1", "U2")))
        said = [(await told(app, u, notes[u] + 1))[-1] for u in ("U1", "U2")]
        assert sorted(t.startswith("Accepted, as grant") for t in said) == [False, True], said
        [grant] = await grants(app)
        assert (grant["effect"], grant["tool"], grant["match"], grant["scope"], grant["scope_value"]) == (
            "deny", "db_exec", {}, "channel", "C1")
        assert grant["created_by"] in ("U1", "U2")
        assert datetime.fromisoformat(grant["expires_at"]) - datetime.fromisoformat(grant["created_at"]) == timedelta(days=7)
        assert app.signoff is not None
        audit = await app.signoff.store.audit_events(grant["id"])
        assert [(e.type, e.actor) for e in audit] == [("grant_created", grant["created_by"]),
                                                      ("suggestion_accepted", grant["created_by"])]
        assert audit[0].data["effect"] == "deny" and audit[1].data["rule"]["effect"] == "deny"
        assert ("signoff_history_accept", DENY_KEY) not in buttons((await home(app, "U1"))["blocks"])

        # The next matching request is rejected at once, on this replica and the other, with no card.
        posts = len(app.slack.calls_to("chat.postMessage"))
        for replica in (app, other):
            made = await replica.submit(action={"name": "db_exec", "params": {"statement": "DROP TABLE t"}},
                                        preview=None)
            assert made["status"] == "rejected", made
            assert made["decision"]["via"] == "grant" and made["decision"]["grant_id"] == grant["id"]
        assert len(app.slack.calls_to("chat.postMessage")) == posts
        elsewhere = await other.submit(action={"name": "db_exec", "params": {"statement": "x"}}, preview=None,
                                       channel="C9")
        assert elsewhere["status"] == "pending"  # scoped to the channel its evidence came from
        # At every tier: the operator puts db_exec at the critical tier; the deny still holds.
        policy.write_text(POLICY.replace("tool: wipe_disk", "tool: db_exec"))
        assert app.signoff.policy is not None and app.signoff.policy.reload()
        critical = await app.submit(action={"name": "db_exec", "params": {"statement": "y"}}, preview=None)
        assert critical["status"] == "rejected" and critical["decision"]["grant_id"] == grant["id"]

        # Listed where grants are listed, and revoked there: the next request asks again, on either replica.
        listing = await app.slack_client.command(user=grant["created_by"], text="grants")
        lines = [b for b in listing.json()["blocks"] if b.get("accessory", {}).get("value") == grant["id"]]
        assert len(lines) == 1 and "denies db_exec with any parameters" in lines[0]["text"]["text"]
        await app.slack_client.block_action(user=grant["created_by"], action_id="signoff_revoke_grant",
                                            value=grant["id"], block_id="grant", channel="C1")
        for _ in range(500):
            if not await grants(app):
                break
            await asyncio.sleep(0.01)
        assert await grants(app) == []
        again = await other.submit(action={"name": "db_exec", "params": {"statement": "z"}}, preview=None)
        assert again["status"] == "pending"
    finally:
        await other.stop()
