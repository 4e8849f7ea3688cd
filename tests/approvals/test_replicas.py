"""Two `signoff serve` processes on one database sweep the same 200 due requests: each message once.

On PostgreSQL (the CI's PostgreSQL pass) the processes split the due rows with
`FOR UPDATE SKIP LOCKED`; on SQLite they take turns as the one writer. Either way every reminder,
escalation post, DM and card update must reach the fake Web API exactly once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path


from storage.sql import SqlStore
from tests.fakes.clock import ClockFile
from bot.sandbox import SlackEmulator
from tests.support.app import App
from tests.support.process import ServerProcess
from tests.approvals.timer_procs import calls, client, log_tail, quiet, server_env
from tests.support.waits import more_sweeps

N = 200


async def test_two_processes_sweep_200_due_requests_and_send_each_message_once(
    db_url: str, slack: SlackEmulator, store: SqlStore, tmp_path: Path
) -> None:
    clock = ClockFile(tmp_path / "clock.txt")
    servers = [ServerProcess(db_url, slack, **server_env(clock)) for _ in range(2)]
    await asyncio.gather(*(s.start(tmp_path) for s in servers))
    apis: list[App] = [client(s, slack) for s in servers]
    try:
        gate = asyncio.Semaphore(16)

        async def submit(n: int) -> str:
            body = {"action": {"name": "refund"}, "summary": f"Refund order {n}", "channel": "C1",
                    "approvers": ["U1", "U2"], "reminders": {"every": "10m", "max": 1}, "timeout": False,
                    "escalation": {"levels": [{"after": "20m", "notify": ["UMGR"]}]}}
            key = {"Idempotency-Key": f"refund-{n}"}
            async with gate:
                for attempt in range(10):  # like an agent: retry a 5xx under the same key
                    status, created = await apis[(n + attempt) % 2].api("POST", "/api/v1/approvals", json=body,
                                                                        headers=key)
                    if status < 500:
                        break
                    await asyncio.sleep(0.2)  # deliberate: an agent's pause before retrying the 5xx
            assert status in (200, 201), created
            return str(created["id"])

        ids = await asyncio.gather(*(submit(n) for n in range(N)))
        await calls(slack, clock, "chat.postMessage", N)
        await quiet(store, clock, timeout=60)
        cards = {}
        for request_id in ids:
            found = await store.get_request(request_id)
            assert found is not None and found.card_ts
            cards[found.card_ts] = request_id
        assert len(cards) == N

        clock.advance(minutes=10)  # every request's reminder is due at once, in both processes
        await calls(slack, clock, "chat.postMessage", 2 * N)
        await quiet(store, clock, timeout=60)
        clock.advance(minutes=10)  # and now every escalation
        await calls(slack, clock, "chat.postMessage", 4 * N)
        await calls(slack, clock, "chat.update", N)
        await quiet(store, clock, timeout=60)
        for server in servers:  # ten more sweeps in each process: nothing more may come
            await more_sweeps(server.url, "timers", 10)
            await more_sweeps(server.url, "outbox", 10)
        await quiet(store, clock)

        posts = slack.calls_to("chat.postMessage", ok_only=False)
        in_threads = Counter(
            (c.args["thread_ts"], c.args["text"].split(":")[0]) for c in posts if c.args.get("thread_ts"))
        assert set(in_threads.values()) == {1}, log_tail(*servers)
        assert {ts for ts, _ in in_threads} == set(cards)
        assert Counter(kind for _, kind in in_threads) == {
            "⏰ Reminder 1 of 1": N, "⬆️ Escalated to <@UMGR> (level 1 of 1)": N}
        dms = [c for c in posts if c.args["channel"] == "UMGR"]
        assert len(dms) == N and len({c.args["metadata"]["event_payload"]["request_id"] for c in dms}) == N
        updates = Counter(c.args["ts"] for c in slack.calls_to("chat.update", ok_only=False))
        assert set(updates) == set(cards) and set(updates.values()) == {1}
        assert len(posts) == 4 * N  # cards, reminders, escalation posts, DMs: nothing else, nothing twice

        actions = Counter()
        for request_id in ids:
            for event in await store.audit_events(request_id):
                if event.type in ("reminded", "escalated"):
                    actions[(event.type, request_id)] += 1
        assert len(actions) == 2 * N and set(actions.values()) == {1}
    finally:
        for api in apis:
            await api.stop()
        for server in servers:
            server.stop()
