"""SIGKILL inside the undo window: the held approval is a stored timer, so the next process (or any
replica) delivers the decision once when the window ends: one decision, one webhook."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.sandbox import SlackEmulator
from storage.sql import SqlStore
from tests.process.chaos import Receiver
from tests.fakes.clock import ClockFile
from tests.support.process import ServerProcess
from tests.support.waits import more_sweeps
from tests.approvals.timer_procs import calls, client, log_tail, quiet, server_env
from tests.approvals.test_undo_window import POLICY

pytestmark = pytest.mark.chaos


async def test_sigkill_inside_the_window_still_delivers_the_decision_once_when_it_ends(
    db_url: str, slack: SlackEmulator, store: SqlStore, tmp_path: Path
) -> None:
    clock = ClockFile(tmp_path / "clock.txt")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {**server_env(clock), "SIGNOFF_POLICY": str(policy), "SIGNOFF_EGRESS_ALLOW": "127.0.0.1"}
    first, second = ServerProcess(db_url, slack, **env), ServerProcess(db_url, slack, **env)
    hooks = Receiver()
    await hooks.start()
    await first.start(tmp_path)
    api = client(first, slack)
    try:
        req = await api.submit(callback_url=hooks.url)
        await calls(slack, clock, "chat.postMessage", 1)
        await api.card(req["id"], timeout=30)
        await quiet(store, clock)
        await api.click(req["id"], "U1", user_name="alice")
        await calls(slack, clock, "chat.update", 1)  # "runs in 30 s · Undo"
        assert (await store.get_request(req["id"])).undo_until is not None  # type: ignore[union-attr]
        first.kill()  # inside the window: nothing was delivered, nothing in memory survives

        clock.advance(seconds=45)  # the window ended while no process ran
        await second.start(tmp_path)
        await api.stop()
        api = client(second, slack)
        poll = asyncio.create_task(api.api("GET", f"/api/v1/approvals/{req['id']}?wait=30"))
        status, body = await poll
        assert status == 200 and body["status"] == "approved", (body, log_tail(first, second))
        assert body["decision"]["decided_by"]["id"] == "U1"
        await calls(slack, clock, "chat.update", 2)
        await quiet(store, clock)
        await more_sweeps(second.url, "timers", 5)
        await more_sweeps(second.url, "outbox", 5)
        audit = [e.type for e in await store.audit_events(req["id"])]
        assert audit.count("approval_held") == 1 and audit.count("decided") == 1, audit
        assert hooks.by_request[req["id"]] == 1, hooks.by_request
        # The held card's update, sent by the killed process but not recorded, is sent again by the next
        # one (chat.update renders the request as it is now, and is idempotent): every later update shows
        # the decision, none offers Undo.
        updates = slack.calls_to("chat.update")
        assert "signoff_undo" in str(updates[0].args["blocks"])
        assert all(u.args["text"].startswith("Approved:") and "signoff_undo" not in str(u.args["blocks"])
                   for u in updates[1:]), [u.args["text"] for u in updates]
    finally:
        await api.stop()
        await hooks.stop()
        first.kill()
        second.stop()
