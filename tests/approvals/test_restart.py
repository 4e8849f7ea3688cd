"""kill -9 in the middle of a request's timeline: a new process skips nothing and sends nothing twice."""

from __future__ import annotations

import asyncio
from pathlib import Path


from storage.sql import SqlStore
from tests.fakes.clock import ClockFile
from bot.sandbox import SlackEmulator
from tests.support.process import ServerProcess
from tests.approvals.timer_steps import TIMELINE
from tests.approvals.timer_procs import calls, client, log_tail, quiet, server_env, thread_posts
from tests.support.waits import long_poll_registered, more_sweeps


async def test_killed_mid_timeline_a_new_process_skips_nothing_and_sends_nothing_twice(
    db_url: str, slack: SlackEmulator, store: SqlStore, tmp_path: Path
) -> None:
    clock = ClockFile(tmp_path / "clock.txt")
    first, second, third = (ServerProcess(db_url, slack, **server_env(clock)) for _ in range(3))
    await first.start(tmp_path)
    api = client(first, slack)
    try:
        req = await api.submit(**TIMELINE)
        await calls(slack, clock, "chat.postMessage", 1)
        card = await api.card(req["id"], timeout=30)
        await quiet(store, clock)

        clock.advance(minutes=10)
        await calls(slack, clock, "chat.postMessage", 2)  # reminder 1
        await quiet(store, clock)

        # At 20m reminder 2 reaches Slack, but the process dies before it hears back or records it.
        slack.hang("chat.postMessage", apply=True)
        clock.advance(minutes=10)
        await calls(slack, clock, "chat.postMessage", 3, ok_only=False)
        first.kill()
        slack.release_hung()

        # While nothing runs, the escalation (30m) falls due and the dead process's lease runs out.
        clock.advance(minutes=15)
        await second.start(tmp_path)
        # The new process escalates; its DM to the manager reaches Slack, and this process dies too.
        await calls(slack, clock, "chat.postMessage", 4, ok_only=False)  # the escalation's thread post
        slack.hang("chat.postMessage", apply=True)  # the next post is the DM: it comes after that post's answer
        await calls(slack, clock, "chat.postMessage", 5, ok_only=False)
        assert slack.calls_to("chat.postMessage", ok_only=False)[-1].args["channel"] == "UMGR"
        second.kill()
        slack.release_hung()

        clock.advance(minutes=5)  # 40m: that lease runs out too
        await third.start(tmp_path)
        await api.stop()
        api = client(third, slack)
        await calls(slack, clock, "conversations.history", 1)  # it looks in the DM before posting again
        await quiet(store, clock)

        poll = asyncio.create_task(api.api("GET", f"/api/v1/approvals/{req['id']}?wait=30"))
        await long_poll_registered(third.url)
        clock.advance(minutes=20)  # 60m: the timeout
        status, final = await poll
        assert status == 200 and final["status"] == "expired", (final, log_tail(first, second, third))
        await calls(slack, clock, "chat.update", 2)
        await quiet(store, clock)
        await more_sweeps(third.url, "timers", 5)  # several more sweeps of the survivor: still nothing new
        await more_sweeps(third.url, "outbox", 5)

        assert [c.args["text"].split(":")[0] for c in thread_posts(slack, card.ts)] == [
            "⏰ Reminder 1 of 2", "⏰ Reminder 2 of 2", "⬆️ Escalated to <@UMGR> (level 1 of 1)"]
        assert slack.calls_to("conversations.replies")  # the second process looked before posting reminder 2 again
        dms = [c for c in slack.calls_to("chat.postMessage", ok_only=False) if c.args["channel"] == "UMGR"]
        assert len(dms) == 1 and "https://fake-slack.test/archives/C1/p" in dms[0].args["text"]
        updates = slack.calls_to("chat.update")
        assert len(updates) == 2 and all(u.args["ts"] == card.ts for u in updates)
        # Card, 2 reminders, escalation post, DM: nothing skipped, nothing twice.
        assert len(slack.calls_to("chat.postMessage", ok_only=False)) == 5
        audit = [e.type for e in await store.audit_events(req["id"])]
        assert [t for t in audit if t in ("reminded", "escalated", "notified", "decided")] == [
            "reminded", "reminded", "escalated", "notified", "decided"]
    finally:
        await api.stop()
        first.kill()
        second.kill()
        third.stop()
