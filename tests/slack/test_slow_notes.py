"""A slow Slack answering refusal notes never holds up other people's decisions (issue 9, defect 6)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from bot.sandbox import SlackEmulator as FakeSlack
from bot.slack.directory import SlackDirectory
from tests.support.app import App, start_app
from tests.support.waits import until


@pytest_asyncio.fixture
async def patient(db_url: str, slack: FakeSlack) -> AsyncIterator[App]:
    """Slack calls may take a minute before they time out: a held slot would show as a stuck decision."""
    running = await start_app(db_url, slack, SIGNOFF_HTTP_TIMEOUT_SECONDS="60", SIGNOFF_OUTBOX_LEASE_SECONDS="120")
    try:
        yield running
    finally:
        await running.stop()


async def status(app: App, request_id: str) -> str:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return str(body["status"])


async def decided_while_held_up(app: App, other_id: str, held_id: str) -> None:
    """U2 approves `other_id` while the work of `held_id`'s clicks is held up in Slack: it is decided,
    and `held_id` is still pending."""
    await app.click(other_id, "U2", user_name="bob")
    async def approved() -> bool:
        return await status(app, other_id) == "approved"

    await until(approved, f"{other_id}'s decision to be stored")
    assert await status(app, held_id) == "pending"


async def test_hung_refusal_notes_do_not_block_another_decision(patient: App) -> None:
    app, slack = patient, patient.slack
    guarded = await app.submit(approvers=["U1"])
    other = await app.submit(approvers=["U2"], summary="Another request")
    await app.card(guarded["id"])
    await app.card(other["id"])
    slack.hang("chat.postEphemeral", times=8)  # every refusal note hangs until released
    try:
        for _ in range(8):  # more refused clicks than decision slots
            await app.click(guarded["id"], "UOUT", user_name="mallory")
        await slack.wait_for("chat.postEphemeral", count=8, timeout=20, ok_only=False)  # all eight stuck in Slack
        await decided_while_held_up(app, other["id"], guarded["id"])
    finally:
        slack.release_hung()


async def test_a_note_the_channel_refuses_goes_as_a_dm(app: App) -> None:
    """Someone who cannot see the card's channel (a form from App Home, an archived channel) still
    hears why: Slack answers the ephemeral with user_not_in_channel, so the note goes as a DM."""
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    app.slack.error("chat.postEphemeral", "user_not_in_channel")
    await app.click(req["id"], "UOUT", user_name="mallory")
    [dm] = [c for c in await app.slack.wait_for("chat.postMessage", count=2) if c.args["channel"] == "UOUT"]
    assert "You are not one of the approvers of this request" in dm.args["text"]
    assert await status(app, req["id"]) == "pending"


async def test_a_graceful_stop_still_sends_the_notes_of_clicks_it_acked(db_url: str, slack: FakeSlack) -> None:
    """A refusal note still on its way when the process is told to stop (a redeploy) reaches the person:
    here Slack rate-limits it (429, Retry-After 3 s) and the client waits to try again; the stop waits
    for it (up to 5 s) before it closes the Slack session."""
    app = await start_app(db_url, slack)
    try:
        req = await app.submit(approvers=["U1"])
        await app.card(req["id"])
        # Retry-After 3 s: longer than the rest of the stop takes, so only waiting for the note lets it through
        slack.fail("chat.postEphemeral", status=429, retry_after=3)
        await app.click(req["id"], "UOUT", user_name="mallory")
        await slack.wait_for("chat.postEphemeral", ok_only=False)  # refused for now: the client waits 3 s
        assert app.signoff is not None
        await app.signoff.stop()
        calls = slack.calls_to("chat.postEphemeral", ok_only=False)
        assert [c.status for c in calls] == [429, 200] and calls[1].args["user"] == "UOUT"
    finally:
        await app.stop()


async def test_a_slow_user_group_lookup_does_not_block_another_decision(patient: App) -> None:
    """Clicks whose check needs a user group's members wait for Slack's answer outside the decision
    slots: while that lookup hangs, someone else's click on another request is decided."""
    app, slack = patient, patient.slack
    slack.add_usergroup("SOPS", ["U1"])
    grouped = await app.submit(approvers=["SOPS"])
    other = await app.submit(approvers=["U2"], summary="Another request")
    await app.card(grouped["id"])
    await app.card(other["id"])
    assert app.signoff is not None
    directory = app.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    directory._groups.clear()  # the submit's lookup has expired: the clicks must ask Slack
    slack.hang("usergroups.users.list", apply=True)
    try:
        for _ in range(8):  # more clicks than decision slots, all waiting on the one lookup
            await app.click(grouped["id"], "U1", user_name="alice")
        await slack.wait_for("usergroups.users.list", ok_only=False)
        await decided_while_held_up(app, other["id"], grouped["id"])
    finally:
        slack.release_hung()
    _, body = await app.api("GET", f"/api/v1/approvals/{grouped['id']}?wait=10")
    assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1"


async def test_a_click_let_through_by_one_group_does_not_wait_for_another_groups_lookup(patient: App) -> None:
    """Approvers SA and SB; the clicker is in SA. SB's lookup hangs: the click is decided all the same
    (the check stops at the first group that holds the person, and so does the look-up before it)."""
    app, slack = patient, patient.slack
    slack.add_usergroup("SA", ["U1"])
    slack.add_usergroup("SB", ["U2"])
    req = await app.submit(approvers=["SA", "SB"])
    await app.card(req["id"])
    assert app.signoff is not None
    directory = app.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    await directory.group_members("SA")  # SA's members are known; SB's must be asked again
    directory._groups.pop("SB", None)
    slack.hang("usergroups.users.list")
    try:
        await app.click(req["id"], "U1", user_name="alice")
        _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=10")
        assert body["status"] == "approved" and body["decision"]["decided_by"]["id"] == "U1"
    finally:
        slack.release_hung()
