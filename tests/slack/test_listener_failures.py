"""A listener whose work fails after Slack was answered tells the person (bot/slack/listener_errors.py).

The failure is a real one of the database: a trigger that aborts every insert into `decisions` (as a
failover or a broken migration would make the decision's write fail), on both engines. The click,
the form and the thread answer each fail after their ack: the person gets a note saying it may not
have been recorded, the request is still pending, and once the database is healthy the same input
goes through."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import sqlalchemy as sa

from bot.sandbox.signed import plain_input
from tests.support.app import App
from tests.support.waits import until

FAILED = "Signoff could not finish handling your"


@asynccontextmanager
async def decisions_fail(app: App) -> AsyncIterator[None]:
    assert app.signoff is not None
    engine = app.signoff.store.engine
    async with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            await conn.execute(sa.text("CREATE TRIGGER fail_decisions BEFORE INSERT ON decisions "
                                       "BEGIN SELECT RAISE(ABORT, 'injected failure'); END"))
        else:
            await conn.execute(sa.text("CREATE FUNCTION fail_decisions() RETURNS trigger LANGUAGE plpgsql AS "
                                       "$$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"))
            await conn.execute(sa.text("CREATE TRIGGER fail_decisions BEFORE INSERT ON decisions "
                                       "FOR EACH ROW EXECUTE FUNCTION fail_decisions()"))
    try:
        yield
    finally:
        async with engine.begin() as conn:
            await conn.execute(sa.text("DROP TRIGGER fail_decisions" if engine.dialect.name == "sqlite"
                                       else "DROP TRIGGER fail_decisions ON decisions"))
            if engine.dialect.name != "sqlite":
                await conn.execute(sa.text("DROP FUNCTION fail_decisions()"))


async def status(app: App, request_id: str, wait: int = 0) -> str:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}" + (f"?wait={wait}" if wait else ""))
    return str(body["status"])


async def test_a_click_that_fails_after_its_ack_is_told(app: App) -> None:
    req = await app.submit(approvers=["U1"])
    await app.card(req["id"])
    async with decisions_fail(app):
        await app.click(req["id"], "U1", user_name="alice")
        [note] = await app.slack.wait_for("chat.postEphemeral")
        assert note.args["user"] == "U1" and FAILED + " click" in note.args["text"]
        assert await status(app, req["id"]) == "pending"
    await app.click(req["id"], "U1", user_name="alice")
    assert await status(app, req["id"], wait=10) == "approved"


async def test_a_form_that_fails_after_its_ack_is_told(app: App) -> None:
    req = await app.submit(approvers=["U1"])
    card = await app.card(req["id"])
    meta = json.dumps({"request_id": req["id"], "version": 2, "channel": card.channel})
    async with decisions_fail(app):
        response = await app.slack_client.view_submission(
            user="U1", user_name="alice", callback_id="signoff_reject", private_metadata=meta,
            values={"reason": {"value": plain_input("Not now")}})
        assert response.status == 200  # acked: Slack closed the form
        [note] = await app.slack.wait_for("chat.postEphemeral")
        assert note.args["user"] == "U1" and FAILED + " answer" in note.args["text"]
        assert await status(app, req["id"]) == "pending"


async def test_a_thread_answer_that_fails_after_its_ack_is_told_in_the_thread(app: App) -> None:
    status_code, asked = await app.api("POST", "/api/v1/questions", json={
        "channel": "C1", "questions": [{"question": "Which environment?", "options": [{"label": "staging"},
                                                                                        {"label": "production"}]}]})
    assert status_code == 201, asked
    card = await app.card(asked["id"])
    async with decisions_fail(app):
        msg = app.slack.add_message("C1", "U1", "staging", thread_ts=card.ts)
        await app.slack_client.event({"type": "message", "channel": "C1", "user": "U1", "text": msg.text,
                                      "ts": msg.ts, "thread_ts": card.ts, "channel_type": "channel"})
        [note] = await app.slack.wait_for("chat.postEphemeral")
        assert note.args["user"] == "U1" and note.args["thread_ts"] == card.ts
        assert FAILED + " message" in note.args["text"]
    _, body = await app.api("GET", f"/api/v1/questions/{asked['id']}")
    assert body["status"] == "pending"


@asynccontextmanager
async def reads_fail(app: App) -> AsyncIterator[None]:
    """Reads of runs fail for a moment: the table is renamed away (as a broken migration would leave it;
    a prepared statement is analysed again after the DDL and fails as well)."""
    assert app.signoff is not None
    engine = app.signoff.store.engine
    async with engine.begin() as conn:
        await conn.execute(sa.text("ALTER TABLE runs RENAME TO runs_away"))
    try:
        yield
    finally:
        async with engine.begin() as conn:
            await conn.execute(sa.text("ALTER TABLE runs_away RENAME TO runs"))


async def test_a_failure_in_someone_elses_thread_is_not_told(app: App, caplog: pytest.LogCaptureFixture) -> None:
    """A reply in a thread that may not be Signoff's at all (any thread of a channel the bot is in):
    when finding out fails, the failure is logged, and the person is not sent Signoff's failure note."""
    assert app.signoff is not None
    root = app.slack.add_message("C1", "U2", "lunch?")
    async with reads_fail(app):
        msg = app.slack.add_message("C1", "U1", "sure", thread_ts=root.ts)
        await app.slack_client.event({"type": "message", "channel": "C1", "user": "U1", "text": msg.text,
                                      "ts": msg.ts, "thread_ts": root.ts, "channel_type": "channel"})
        await until(lambda: any("failed after its ack" in r.getMessage() for r in caplog.records),
                    "the listener to fail after its ack")
        if app.signoff.background:
            await asyncio.wait(list(app.signoff.background), timeout=5)
    assert app.slack.calls_to("chat.postEphemeral", ok_only=False) == []
