"""Chaos: SIGKILL `signoff serve` at random points while agents submit and wait, people click, timers
fire and agent runs execute tools; restart it each time; then check that nothing was lost or doubled.

    python -m tests.process.chaos --kills 200 --seed 7 [--replicas 2] [--database-url postgresql://...]

Invariants checked at the end (`Chaos.check`):
- every request has exactly one card in Slack;
- every request has at most one decision (one `decided` audit row, one decisions row);
- every agent waiting on a request got its decision, and it is the stored one;
- no tool ran twice (each execution writes an .eml tagged with its tool_use id);
- no lost webhook: every decided request with a callback_url was delivered to the receiver;
- no acked click lost: a card is clicked until Slack's ack for one click comes back, never after;
  its request ends decided by one of the people who clicked it, or was decided before that ack.
Everything is driven over HTTP; Slack, Anthropic and the webhook receiver are the local fakes.
"""

from __future__ import annotations

import argparse
import asyncio
import email
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import sqlalchemy as sa

from storage.schema import audit_events, decisions, outbox
from storage.sql import SqlStore
from storage.stores import open_store
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from bot.sandbox import SlackEmulator as FakeSlack
from bot.sandbox.signed import SlackClient
from tests.support.app import API_TOKEN, SIGNING_SECRET, approval_body
from tests.support.process import ServerProcess

RETRYABLE = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)


@dataclass
class Figures:
    kills: int = 0
    restarts_s: list[float] = field(default_factory=list)
    submitted: int = 0
    runs: int = 0
    clicks: int = 0
    waits_answered: int = 0
    api_retries: int = 0

    def line(self) -> str:
        restart = sorted(self.restarts_s)
        median = restart[len(restart) // 2] if restart else 0.0
        return (f"kills={self.kills} restart_median={median:.2f}s requests={self.submitted} runs={self.runs} "
                f"clicks={self.clicks} long_polls_answered={self.waits_answered} api_retries={self.api_retries}")


class Receiver:
    """Webhook receiver: records every delivery, by request id, and its body."""

    def __init__(self) -> None:
        self.by_request: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.url = ""
        self._runner: aiohttp.web.AppRunner | None = None

    async def start(self) -> None:
        from aiohttp import web

        async def hook(request: web.Request) -> web.Response:
            body = json.loads(await request.read())
            self.by_request[body["request"]["id"]] += 1
            self.bodies.append(body)
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_post("/hook", hook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/hook"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def model_reply(body: dict[str, Any]) -> Any:
    """The demo agent's model: first turn sends one email (a tool that is not safe to repeat); then done."""
    last = body["messages"][-1]
    if last["role"] == "user" and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                      for b in (last["content"] if isinstance(last["content"], list) else [])):
        return message(text("Sent."))
    task = body["messages"][0]["content"][0]["text"]
    return message(tool_use("send_email", {"to": "ops@example.com", "subject": task, "body": "hello"},
                            id=f"toolu_{abs(hash(task)) % 10**12:012d}"))


class Chaos:
    def __init__(self, db_url: str, workdir: Path, *, seed: int, kills: int, replicas: int) -> None:
        self.db_url = db_url
        self.work = workdir
        self.random = random.Random(seed)
        self.kills = kills
        self.replicas = replicas
        self.figures = Figures()
        self.slack = FakeSlack()
        self.model = FakeAnthropic()
        self.receiver = Receiver()
        self.servers: list[ServerProcess] = []
        self.session: aiohttp.ClientSession | None = None
        self.requests: list[str] = []
        self.run_ids: list[str] = []
        self.seen_decisions: dict[str, dict[str, Any]] = {}
        self.clicked_by: dict[str, set[str]] = {}  # who clicked each request's card (acked or not)
        self.acked_at: dict[str, datetime] = {}  # when Slack got the ack of the card's click
        self.tasks: set[asyncio.Task[Any]] = set()

    # -- plumbing ---------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        return {
            # Real time (no test clock): Slack's ts and the request times must agree, as in production,
            # and leases must only run out as time really passes. Timers are short instead.
            "SIGNOFF_SWEEP_SECONDS": "0.2",
            "SIGNOFF_OUTBOX_SWEEP_SECONDS": "0.2", "SIGNOFF_OUTBOX_LEASE_SECONDS": "4",
            "SIGNOFF_HTTP_TIMEOUT_SECONDS": "2",
            "SIGNOFF_LOG_LEVEL": os.environ.get("CHAOS_LOG_LEVEL", "WARNING"),
            "SIGNOFF_EGRESS_ALLOW": "127.0.0.1", "ANTHROPIC_BASE_URL": self.model.url,
            "ANTHROPIC_API_KEY": "test-key", "SIGNOFF_MODEL": "claude-test",
            "SIGNOFF_WORKSPACE": str(self.work / "workspace"), "SIGNOFF_EMAIL_OUTBOX": str(self.work / "outbox"),
            "SIGNOFF_RUN_LEASE_SECONDS": "3", "SIGNOFF_RUN_SWEEP_SECONDS": "0.2",
            "SIGNOFF_WEBHOOK_BACKOFF_CAP_SECONDS": "2",  # a retry after a kill comes within the test's patience
            "SIGNOFF_SLACK_INBOX_LEASE_SECONDS": "2",  # an acked click of a killed process is replayed soon
            "SIGNOFF_REMIND_EVERY": "3s", "SIGNOFF_REMIND_MAX": "3", "SIGNOFF_TIMEOUT": "20s",
        }

    def url(self) -> str:
        return self.random.choice(self.servers).url  # "one port pair": any replica answers

    async def api(self, method: str, path: str, *, json_body: Any = None, headers: dict[str, str] | None = None,
                  timeout: float = 30) -> tuple[int, Any]:
        """Like an agent's client: connection errors and 5xx are retried (same Idempotency-Key)."""
        assert self.session is not None
        hdrs = {"Authorization": f"Bearer {API_TOKEN}", **(headers or {})}
        while True:
            try:
                async with self.session.request(method, self.url() + path, json=json_body, headers=hdrs,
                                                timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                    body = await resp.json(content_type=None)
                    if resp.status < 500:
                        return resp.status, body
            except RETRYABLE:
                pass
            self.figures.api_retries += 1
            await asyncio.sleep(0.05)  # deliberate: an agent's pause before retrying a server that is down

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- the actors -------------------------------------------------------------------------

    async def agent(self, n: int) -> None:
        body = approval_body(summary=f"Chaos {n}", callback_url=self.receiver.url, approvers=["U1", "U2"])
        status, created = await self.api("POST", "/api/v1/approvals", json_body=body,
                                         headers={"Idempotency-Key": f"chaos-{n}"})
        assert status in (200, 201), created
        request_id = created["id"]
        if request_id not in self.requests:
            self.requests.append(request_id)
        self.figures.submitted += 1
        while True:  # wait like an agent: long-poll again until decided
            status, seen = await self.api("GET", f"/api/v1/approvals/{request_id}?wait=3", timeout=10)
            if seen.get("decision"):
                self.seen_decisions[request_id] = seen["decision"]
                self.figures.waits_answered += 1
                return

    async def run(self, n: int) -> None:
        status, run = await self.api("POST", "/api/v1/runs", json_body={"task": f"chaos run {n}", "channel": "C1"},
                                     headers={"Idempotency-Key": f"chaos-run-{n}"})
        assert status in (200, 201), run
        if run["id"] not in self.run_ids:
            self.run_ids.append(run["id"])
            self.figures.runs += 1

    async def person(self) -> None:
        """Click Approve on every open card until one click's ack comes back: like a person, who saw it
        taken and does not click again (the click must not be lost, whenever the kill lands)."""
        assert self.session is not None
        for msg in list(self.slack.messages.values()):
            meta = (msg.metadata or {}).get("event_payload") or {}
            request_id = meta.get("request_id")
            if not request_id or request_id in self.acked_at or not any(b.get("type") == "actions" for b in msg.blocks):
                continue
            user = self.random.choice(["U1", "U2"])
            self.clicked_by.setdefault(request_id, set()).add(user)
            try:
                async with SlackClient(self.url(), SIGNING_SECRET, fake=self.slack) as clicker:
                    answer = await clicker.block_action(user=user, user_name=user.lower(), action_id="signoff_approve",
                                                        value=request_id, block_id="decide", channel=msg.channel,
                                                        message_ts=msg.ts)
                if answer.status == 200:
                    self.acked_at.setdefault(request_id, datetime.now(UTC))
                self.figures.clicks += 1
            except RETRYABLE:
                pass

    # -- the loop -----------------------------------------------------------------------------

    async def start_server(self, server: ServerProcess) -> None:
        started = time.monotonic()
        await server.start(self.work)
        self.figures.restarts_s.append(time.monotonic() - started)

    async def go(self) -> None:
        await self.slack.start()
        self.slack.add_channel("C1", "approvals")
        for uid, name in [("U1", "alice"), ("U2", "bob")]:
            self.slack.add_user(uid, name)
        await self.model.start()
        self.model.on_request(model_reply)
        await self.receiver.start()
        self.session = aiohttp.ClientSession()
        self.servers = [ServerProcess(self.db_url, self.slack, **self.env()) for _ in range(self.replicas)]
        await asyncio.gather(*(self.start_server(s) for s in self.servers))
        try:
            n = 0
            for kill in range(self.kills):
                for _ in range(2):
                    self.spawn(self.agent(n))
                    n += 1
                if kill % 3 == 0:
                    self.spawn(self.run(kill))
                self.spawn(self.person())
                await asyncio.sleep(self.random.uniform(0.05, 0.5))  # the kill lands anywhere in the work
                victim = self.random.choice(self.servers)
                victim.kill()
                self.figures.kills += 1
                victim.proc = None
                await self.start_server(victim)
            await self.until_quiet()
            await self.check()
        finally:
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            for server in self.servers:
                server.stop()
            await self.session.close()
            await self.receiver.stop()
            await self.model.stop()
            await self.slack.stop()

    async def until_quiet(self, timeout: float = 180) -> None:
        """No more kills: click until every request is decided; let every waiter, run and webhook finish."""
        deadline = time.monotonic() + timeout
        store = await open_store(self.db_url)
        try:
            while True:
                await self.person()
                busy = await self._busy(store)
                if not busy and not self.tasks:
                    return
                if time.monotonic() > deadline:
                    tails = "\n".join(s.log_path.read_text()[-3000:] for s in self.servers if s.log_path)
                    raise AssertionError(f"did not settle: {busy}, {len(self.tasks)} actors still waiting\n{tails}")
                await asyncio.sleep(0.2)  # test-side: waiting for the system to finish its work
        finally:
            await store.close()

    async def _busy(self, store: SqlStore) -> str:
        async with store.engine.connect() as conn:
            pending = (await conn.execute(sa.text("SELECT count(*) FROM requests WHERE status = 'pending'"))).scalar()
            left = (await conn.execute(sa.select(outbox.c.kind, outbox.c.attempts, outbox.c.failures,
                                                 outbox.c.last_error, outbox.c.next_attempt_at,
                                                 outbox.c.lease_until)
                                       .where(outbox.c.status == "pending"))).all()
            kinds = [r[0] for r in left]
            queued = (f"{len(kinds)} ({', '.join(sorted(set(kinds)))}; first: "
                      f"{[tuple(map(str, r)) for r in left[:3]]})") if kinds else 0
            running = (await conn.execute(sa.text(
                "SELECT count(*) FROM runs WHERE status NOT IN ('completed', 'failed', 'cancelled')"))).scalar()
        parts = [f"{pending} requests pending" if pending else "", f"{queued} outbox items" if queued else "",
                 f"{running} runs going" if running else ""]
        return ", ".join(p for p in parts if p)

    # -- the invariants ---------------------------------------------------------------------

    async def check(self) -> None:
        store = await open_store(self.db_url)
        try:
            async with store.engine.connect() as conn:
                ids = [r[0] for r in (await conn.execute(sa.text("SELECT id FROM requests"))).all()]
                decided = Counter(r[0] for r in (await conn.execute(
                    sa.select(audit_events.c.request_id).where(audit_events.c.type == "decided"))).all())
                decision_rows = {r.request_id: r for r in (await conn.execute(sa.select(decisions))).all()}
                dead = (await conn.execute(sa.select(outbox.c.kind, outbox.c.last_error)
                                           .where(outbox.c.status == "dead"))).all()
        finally:
            await store.close()
        cards = Counter((m.metadata or {}).get("event_payload", {}).get("request_id")
                        for m in self.slack.messages.values()
                        if (m.metadata or {}).get("event_type") == "signoff_card")
        problems: list[str] = []
        for request_id in ids:
            if cards[request_id] != 1:
                problems.append(f"{request_id}: {cards[request_id]} cards")
            if decided[request_id] > 1:
                problems.append(f"{request_id}: {decided[request_id]} decisions")
        for request_id, acked in self.acked_at.items():
            row = decision_rows.get(request_id)
            if row is None:
                problems.append(f"{request_id}: an acked click, and no decision")
            elif row.decided_by_id not in self.clicked_by[request_id] and not row.decided_at <= acked:
                problems.append(f"{request_id}: acked click lost: decided by {row.decided_by_id or row.via} "
                                f"at {row.decided_at}, after the click's ack at {acked}")
        for request_id, seen in self.seen_decisions.items():
            row = decision_rows.get(request_id)
            if row is None or seen["outcome"] != row.outcome:
                problems.append(f"{request_id}: the waiter saw {seen['outcome']}, stored {row and row.outcome}")
        agent_requests = set(self.requests)
        if set(self.seen_decisions) != agent_requests:
            problems.append(f"waiters without a decision: {sorted(agent_requests - set(self.seen_decisions))}")
        for request_id in agent_requests:
            if request_id in decision_rows and not self.receiver.by_request[request_id]:
                problems.append(f"{request_id}: decided, webhook never delivered")
        executions = Counter()
        for path in (self.work / "outbox").glob("*.eml"):
            executions[email.message_from_bytes(path.read_bytes())["X-Signoff-Tool-Use"]] += 1
        problems += [f"tool {t} ran {c} times" for t, c in executions.items() if c > 1]
        problems += [f"outbox item gave up: {kind}: {error}" for kind, error in dead]
        duplicates = sum(c - 1 for c in self.receiver.by_request.values() if c > 1)
        print(f"chaos: {self.figures.line()} acked_clicks={len(self.acked_at)} cards={sum(cards.values())} decisions={len(decision_rows)} "
              f"tool_runs={sum(executions.values())} webhooks={sum(self.receiver.by_request.values())} "
              f"(repeats {duplicates}, at least once by design)")
        assert not problems, "\n".join(problems[:30])


async def run_chaos(db_url: str, *, seed: int, kills: int, replicas: int) -> Figures:
    with tempfile.TemporaryDirectory(prefix="signoff-chaos-") as tmp:
        work = Path(tmp)
        chaos = Chaos(db_url, work, seed=seed, kills=kills, replicas=replicas)
        try:
            await chaos.go()
        except BaseException:
            if keep := os.environ.get("CHAOS_KEEP"):  # the servers' whole logs, for a failed run
                shutil.copytree(work, Path(keep) / f"seed-{seed}", dirs_exist_ok=True)
            raise
        return chaos.figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file (migrated)")
    args = parser.parse_args(argv)
    from storage.migrate import upgrade

    tmp = Path(tempfile.mkdtemp(prefix="signoff-chaos-db-"))
    url = args.database_url or f"sqlite:///{tmp / 'chaos.db'}"
    try:
        asyncio.run(upgrade(url))
        asyncio.run(run_chaos(url, seed=args.seed, kills=args.kills, replicas=args.replicas))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
