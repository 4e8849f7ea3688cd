"""Time to decide, for a scripted week on a clock the test moves: the Prometheus histograms and counters,
`/signoff stats`, App Home's section, and the weekly digest, posted once per channel-week by two replicas."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import number_input, plain_input
from tests.fakes.clock import FakeClock
from tests.slack.test_decisions import EDIT_PARAMS, EDIT_SCHEMA, edit_values
from tests.support.app import App, start_app
from tests.support.outbox import settle
from tests.approvals.timer_steps import tick
from tests.support.docs import fenced, page

# The digest settings as docs/stats.md shows them.
ENV = {"SIGNOFF_SWEEP_SECONDS": "3600", **dict(
    line.split("=", 1) for line in fenced(page("docs/stats.md"), "bash", after="## Weekly digest").splitlines() if line)}


@pytest_asyncio.fixture
async def week(db_url: str, slack: SlackEmulator) -> AsyncIterator[tuple[App, App, FakeClock]]:
    clock = FakeClock()  # Monday 2030-01-07 09:00 UTC
    first = await start_app(db_url, slack, clock=clock, **ENV)
    second = await start_app(db_url, slack, clock=clock, **ENV)  # a second replica on the same database
    try:
        yield first, second, clock
    finally:
        await second.stop()
        await first.stop()


async def metrics(app: App) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with app.session.get(app.url + "/metrics") as resp:
        text = await resp.text()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def decided(app: App, request_id: str) -> dict[str, Any]:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=10")
    assert body["status"] != "pending", body
    return body


async def test_a_scripted_week_shows_in_the_histograms_stats_home_and_one_digest(
        week: tuple[App, App, FakeClock], slack: SlackEmulator) -> None:
    app, other, clock = week
    # Monday 09:00: a send_email, opened (its Reject form) after 1 min and rejected after 2 min.
    r1 = await app.submit()
    await app.card(r1["id"])
    await tick(app, clock, minutes=1)
    await app.click(r1["id"], "U1", action="signoff_reject")
    [opened] = await slack.wait_for("views.open")
    await tick(app, clock, minutes=1)
    await app.slack_client.view_submission(user="U1", callback_id="signoff_reject",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"reason": {"value": plain_input("wrong customer")}})
    await decided(app, r1["id"])

    # 10:00: another send_email, approved from the card after 10 min (deciding is its first view).
    await tick(app, clock, minutes=58)
    r2 = await app.submit()
    await app.card(r2["id"])
    await tick(app, clock, minutes=10)
    await app.click(r2["id"], "U1")
    await decided(app, r2["id"])

    # Tuesday: a refund approved with an edit after 5 min (the form opened at once).
    await tick(app, clock, hours=23, minutes=50)
    r3 = await app.submit(action={"name": "refund", "params": EDIT_PARAMS, "params_schema": EDIT_SCHEMA})
    await app.card(r3["id"])
    await app.click(r3["id"], "U1", action="signoff_edit")
    view = (await slack.wait_for("views.open", 2))[-1].args["view"]
    await tick(app, clock, minutes=5)
    await app.slack_client.view_submission(user="U1", callback_id="signoff_edit",
                                           private_metadata=view["private_metadata"],
                                           values=edit_values(amount=number_input("45")))
    assert (await decided(app, r3["id"]))["decision"]["changes"]

    # Wednesday: a deploy escalated after 30 min and expired after 2 h, nobody having looked.
    await tick(app, clock, hours=24)
    r4 = await app.submit(action={"name": "deploy", "params": {"service": "api"}}, timeout="2h",
                          escalation={"levels": [{"after": "30m", "notify": ["UMGR"]}]})
    await app.card(r4["id"])
    await tick(app, clock, minutes=30)
    await tick(app, clock, minutes=90)
    assert (await decided(app, r4["id"]))["status"] == "expired"

    found = await metrics(app)
    email = {"tier": "high", "channel": "C1", "tool": "send_email"}
    assert sample(found, "signoff_time_to_decision_seconds_count", **email) == 2
    assert sample(found, "signoff_time_to_decision_seconds_sum", **email) == 120 + 600
    assert sample(found, "signoff_time_to_decision_seconds_bucket", **email, le="300.0") == 1  # 2 min; 10 min is above
    assert sample(found, "signoff_time_to_first_view_seconds_sum", **email) == 60 + 600
    refund = {"tier": "high", "channel": "C1", "tool": "refund"}
    assert sample(found, "signoff_time_to_decision_seconds_sum", **refund) == 300
    assert sample(found, "signoff_time_to_first_view_seconds_sum", **refund) == 0  # opened at once
    for outcome in ("rejected", "edited", "escalated", "expired"):
        assert sample(found, "signoff_request_outcomes_total", outcome=outcome, tier="high") == 1, outcome
    assert sample(found, "signoff_time_to_decision_seconds_count", tier="high", channel="C1", tool="deploy") == 0

    # Sunday: /signoff stats in the channel, and App Home's section, cover the week so far.
    await tick(app, clock, days=4)
    answer = (await app.slack_client.command(user="U1", text="stats")).json()
    text = answer["text"]
    assert "*4* requests" in text and "median *5 min*, p90 *10 min*" in text, text
    assert "1 rejected" in text and "1 expired" in text and "1 escalated" in text and "(1 edited)" in text, text
    assert "`send_email` (2)" in text and f"`deploy` `{r4['id']}`" in text, text
    example = fenced(page("docs/stats.md"), "text", after="## In Slack")  # the page's example has the answer's shape
    for part in ("📊 Last 7 days in", "still pending", "Time to decide: median", "(1 edited)", "Most asked: `send_email` (2)",
                 "Expired: `deploy` `"):
        assert part in example and part in text, part
    everywhere = (await app.slack_client.command(user="U1", text="stats all", channel="C9")).json()["text"]
    assert "*4* requests" in everywhere and "the workspace" in everywhere
    nothing = (await app.slack_client.command(user="U1", text="stats", channel="C9")).json()["text"]
    assert "No approval requests." in nothing

    # Monday 09:00: the digest falls due; both replicas sweep, twice each: one message in C1.
    await tick(app, clock, days=1)
    await asyncio.gather(app.signoff.timers.sweep(), other.signoff.timers.sweep())  # type: ignore[union-attr]
    await asyncio.gather(app.signoff.timers.sweep(), other.signoff.timers.sweep())  # type: ignore[union-attr]
    await settle(app)
    await settle(other)
    digests = [c for c in slack.calls_to("chat.postMessage") if "Weekly approvals digest" in c.args["text"]]
    assert len(digests) == 1, [c.args["text"] for c in digests]
    digest = digests[0].args
    assert digest["channel"] == "C1" and "*4* requests" in digest["text"], digest["text"]
    assert "median *5 min*, p90 *10 min*" in digest["text"] and f"`deploy` `{r4['id']}`" in digest["text"]
    assert "Most asked: `send_email` (2)" in digest["text"]

    # The next week's digest is a new message, of that week alone.
    await app.submit(channel="C1")
    await tick(app, clock, days=7)
    await other.signoff.timers.sweep()  # type: ignore[union-attr]
    await settle(other)
    digests = [c for c in slack.calls_to("chat.postMessage") if "Weekly approvals digest" in c.args["text"]]
    assert len(digests) == 2 and "*1* request " in digests[1].args["text"], digests[1].args["text"]


async def test_home_opened_is_a_first_view_and_the_home_shows_the_last_7_days(
        week: tuple[App, App, FakeClock], slack: SlackEmulator) -> None:
    app, _, clock = week
    req = await app.submit()
    await app.card(req["id"])
    await tick(app, clock, minutes=3)
    await app.slack_client.event({"type": "app_home_opened", "user": "U1", "tab": "home"})
    await slack.wait_for("views.publish", 1)  # the event's listener ran (it publishes after it stamps)
    await tick(app, clock, minutes=3)
    await app.slack_client.event({"type": "app_home_opened", "user": "U2", "tab": "home"})  # not a first view
    await slack.wait_for("views.publish", 2)
    found = await metrics(app)
    email = {"tier": "high", "channel": "C1", "tool": "send_email"}
    assert sample(found, "signoff_time_to_first_view_seconds_count", **email) == 1
    assert sample(found, "signoff_time_to_first_view_seconds_sum", **email) == 180
    home = slack.home_views["U1"]
    texts = [b["text"]["text"] for b in home["blocks"] if b["type"] in ("header", "section")]
    assert "Last 7 days" in texts and any("*1* request " in t for t in texts), texts
    await app.click(req["id"], "U1")
    await decided(app, req["id"])
    found = await metrics(app)
    assert sample(found, "signoff_time_to_first_view_seconds_count", **email) == 1  # deciding did not count again
