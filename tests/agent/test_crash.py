"""kill -9 the server while a run waits for approval, and again just after a tool finished but
before its result was stored: after each restart the run carries on, and every tool ran exactly once.

The second window is made real, not simulated: the webhook the tool calls is a server in this
test, which counts the call and holds its answer; meanwhile the test locks the tool's row in the
database (PostgreSQL: the row, FOR UPDATE; SQLite: the whole file, BEGIN IMMEDIATE), then lets
the answer go. The tool finishes (its HTTP connection closes: it has returned), its result write
blocks on the lock, and the server is killed there.
"""

from __future__ import annotations

import asyncio
import email
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio
from aiohttp import web
from sqlalchemy.engine import make_url

from tests.agent.conftest import agent_env
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from bot.sandbox import SlackEmulator
from bot.sandbox.signed import SlackClient
from tests.support.app import API_TOKEN, SIGNING_SECRET
from tests.support.process import ServerProcess
from tests.support.waits import until

HEADERS = {"Authorization": f"Bearer {API_TOKEN}"}


class Webhook:
    """A local webhook receiver that counts calls and answers only when told to."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.respond = asyncio.Event()
        self.transports: list[Any] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/hook"

    async def handle(self, request: web.Request) -> web.Response:
        self.calls.append(await request.json())
        self.transports.append(request.transport)
        self.arrived.set()
        await self.respond.wait()
        return web.json_response({"deployed": True})

    async def closed(self) -> None:
        """Until the tool's connection is closed: its `async with` has exited, the tool returned."""
        await until(lambda: all(t is None or t.is_closing() for t in self.transports),
                    "the tool's connection to close")

    async def stop(self) -> None:
        self.respond.set()
        if self.runner is not None:
            await self.runner.cleanup()


class Server:
    """One `signoff serve` process and the clients that talk to it."""

    def __init__(self, proc: ServerProcess, slack: SlackEmulator) -> None:
        self.proc = proc
        self.http = aiohttp.ClientSession(headers=HEADERS)
        self.slack_client = SlackClient(proc.url, SIGNING_SECRET, fake=slack)
        self.slack = slack

    @classmethod
    async def start(cls, db_url: str, slack: SlackEmulator, env: dict[str, str], log_dir: Path) -> Server:
        proc = ServerProcess(db_url, slack, **env)
        await proc.start(log_dir)
        return cls(proc, slack)

    async def get(self, path: str) -> Any:
        async with self.http.get(self.proc.url + path) as response:
            assert response.status == 200, await response.text()
            return await response.json()

    async def post(self, path: str, body: Any) -> Any:
        async with self.http.post(self.proc.url + path, json=body) as response:
            assert response.status in (200, 201), await response.text()
            return await response.json()

    async def wait_run(self, run_id: str, cond: Any, timeout: float = 20.0) -> dict[str, Any]:
        async def there() -> dict[str, Any] | None:
            run = await self.get(f"/api/v1/runs/{run_id}")
            return run if cond(run) else None

        return await until(there, f"run {run_id} to get there", timeout=timeout)

    async def waiting_card(self, run_id: str, tool_use_id: str) -> tuple[str, Any]:
        run = await self.wait_run(run_id, lambda r: any(
            c["tool_use_id"] == tool_use_id and c["status"] == "waiting" for c in r["tool_calls"]))
        [call] = [c for c in run["tool_calls"] if c["tool_use_id"] == tool_use_id]
        async def card() -> dict[str, Any] | None:
            return (await self.get(f"/api/v1/approvals/{call['request_id']}"))["card"]

        posted = await until(card, f"the card of {call}")
        return call["request_id"], self.slack.messages[(posted["channel"], posted["ts"])]

    async def approve(self, request_id: str, card: Any) -> None:
        response = await self.slack_client.block_action(
            user="U1", user_name="alice", action_id="signoff_approve", value=request_id, block_id="decide",
            channel=card.channel, message_ts=card.ts)
        assert response.status == 200, response.text

    def kill(self) -> None:
        self.proc.kill()

    async def close(self) -> None:
        self.proc.stop()
        await self.http.close()
        await self.slack_client.close()


class RowLock:
    """Holds the database lock that the tool's result write needs."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self.pg: Any = None
        self.sqlite: sqlite3.Connection | None = None

    async def take(self, tool_use_id: str) -> None:
        url = make_url(self.db_url)
        if url.get_backend_name() == "sqlite":
            def lock() -> sqlite3.Connection:
                conn = sqlite3.connect(url.database or "", timeout=10, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("BEGIN IMMEDIATE")
                return conn

            self.sqlite = await asyncio.to_thread(lock)
            return
        import asyncpg

        self.pg = await asyncpg.connect(host=url.host, port=url.port or 5432, user=url.username,
                                        password=url.password, database=url.database)
        await self.pg.execute("BEGIN")
        await self.pg.execute("SELECT 1 FROM tool_executions WHERE tool_use_id = $1 FOR UPDATE", tool_use_id)

    async def writer_blocked(self) -> None:
        """PostgreSQL: until the server's UPDATE of the row waits on our lock (SQLite cannot tell)."""
        if self.pg is None:
            return
        for _ in range(3000):
            waiting = await self.pg.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE 'UPDATE tool_executions%'")
            if waiting:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the server never tried to store the tool's result")

    async def release(self) -> None:
        if self.sqlite is not None:
            self.sqlite.execute("ROLLBACK")
            self.sqlite.close()
            self.sqlite = None
        if self.pg is not None:
            await self.pg.execute("ROLLBACK")
            await self.pg.close()
            self.pg = None


@pytest_asyncio.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hook = Webhook()
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


async def test_kill_while_waiting_and_after_a_tool_finished_every_tool_runs_once(
    db_url: str, slack: SlackEmulator, model: FakeAnthropic, webhook: Webhook, tmp_path: Path
) -> None:
    env = agent_env(model, tmp_path, SIGNOFF_RUN_LEASE_SECONDS="3", SIGNOFF_RUN_SWEEP_SECONDS="0.2",
                    SIGNOFF_OUTBOX_SWEEP_SECONDS="0.2", SIGNOFF_OUTBOX_LEASE_SECONDS="2",
                    SIGNOFF_HTTP_TIMEOUT_SECONDS="1", SIGNOFF_EGRESS_ALLOW="127.0.0.1")  # the hook is local
    model.script(
        message(text("Emailing first."), tool_use("send_email", {"to": "ops@example.com", "subject": "Deploying",
                                                                 "body": "Deploy starts now."}, id="toolu_email")),
        message(text("Now the deploy."), tool_use("call_webhook", {"url": webhook.url, "payload": {"env": "prod"}},
                                                  id="toolu_hook")),
        message(text("Email sent; the deploy's outcome is unknown, please check it.")),
    )
    lock = RowLock(db_url)
    servers: list[Server] = []
    try:
        # 1. The run waits for approval of the email; kill -9.
        first = await Server.start(db_url, slack, env, tmp_path)
        servers.append(first)
        run = await first.post("/api/v1/runs", {"task": "Announce and deploy", "channel": "C1"})
        email_request, email_card = await first.waiting_card(run["id"], "toolu_email")
        first.kill()

        # 2. Restart; the approval is clicked on the new process and the run resumes from the database.
        second = await Server.start(db_url, slack, env, tmp_path)
        servers.append(second)
        await second.approve(email_request, email_card)
        hook_request, hook_card = await second.waiting_card(run["id"], "toolu_hook")
        assert len(list((tmp_path / "outbox").glob("*.eml"))) == 1

        # 3. The webhook tool runs; kill -9 after it finished, before its result is stored.
        await second.approve(hook_request, hook_card)
        await asyncio.wait_for(webhook.arrived.wait(), 10)
        await lock.take("toolu_hook")
        webhook.respond.set()
        await asyncio.wait_for(webhook.closed(), 10)
        await lock.writer_blocked()
        second.kill()
        await lock.release()

        # 4. Restart: the sweep picks the run up once the dead process's lease lapses.
        third = await Server.start(db_url, slack, env, tmp_path)
        servers.append(third)
        done = await third.wait_run(run["id"], lambda r: r["status"] in ("completed", "failed", "cancelled"))
        assert done["status"] == "completed", done
        # The thread notes go out through the outbox, after the run's last write.
        # The deploy's result was lost with the process: recorded as not known, never re-run, so the run is
        # not a plain success.
        closing = await until(lambda: [m.text for m in slack.channel_messages("C1", thread_ts=done["root"]["ts"])
                                       if "Done after" in m.text or "Finished with" in m.text],
                              "the run's closing note in its thread")
        assert closing == ["⚠️ Finished with 1 failed step (after 3 steps); see the cards above."], closing
    finally:
        for server in servers:
            await server.close()
        await lock.release()

    # Every tool ran exactly once.
    [sent] = list((tmp_path / "outbox").glob("*.eml"))
    assert email.message_from_bytes(sent.read_bytes())["Subject"] == "Deploying"
    assert webhook.calls == [{"env": "prod"}]
    assert {c["tool_use_id"]: c["attempts"] for c in done["tool_calls"]} == {"toolu_email": 1, "toolu_hook": 1}

    # The model was told the webhook's outcome is unknown (and not asked to re-plan before that).
    assert len(model.requests) == 3 and model.rejections == []
    emailed = model.requests[1]["messages"][-1]["content"][0]
    assert emailed["tool_use_id"] == "toolu_email" and not emailed.get("is_error")
    [hooked] = model.requests[2]["messages"][-1]["content"]
    assert hooked["tool_use_id"] == "toolu_hook" and hooked["is_error"] is True
    assert "outcome of this tool call is unknown" in hooked["content"]
    # ... and so was the thread.
    channel, root_ts = done["root"]["channel"], done["root"]["ts"]
    notes = [m.text for m in slack.channel_messages(channel, thread_ts=root_ts)]
    assert any("outcome is unknown" in n and "call_webhook" in n for n in notes), notes


async def test_an_interrupted_idempotent_tool_runs_again_after_a_crash(
    db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path
) -> None:
    hits: list[int] = []
    hold = asyncio.Event()

    async def page(request: web.Request) -> web.Response:
        hits.append(len(hits) + 1)
        if len(hits) == 1:
            await hold.wait()  # the first fetch never gets its answer: the server dies meanwhile
        return web.Response(text="status: green")

    site_app = web.Application()
    site_app.router.add_get("/status", page)
    site_runner = web.AppRunner(site_app, access_log=None)
    await site_runner.setup()
    await web.TCPSite(site_runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{site_runner.addresses[0][1]}/status"
    env = agent_env(model, tmp_path, SIGNOFF_RUN_LEASE_SECONDS="3", SIGNOFF_RUN_SWEEP_SECONDS="0.2",
                    SIGNOFF_FETCH_URL_RISK="low", SIGNOFF_EGRESS_ALLOW="127.0.0.1")
    model.script(message(tool_use("fetch_url", {"url": url}, id="toolu_get")), message(text("All green.")))
    servers: list[Server] = []
    try:
        first = await Server.start(db_url, slack, env, tmp_path)
        servers.append(first)
        run = await first.post("/api/v1/runs", {"task": "Is the status page green?", "channel": "C1"})
        await until(lambda: hits, "the tool's request to reach the site")
        first.kill()
        second = await Server.start(db_url, slack, env, tmp_path)
        servers.append(second)
        done = await second.wait_run(run["id"], lambda r: r["status"] in ("completed", "failed"))
    finally:
        hold.set()
        for server in servers:
            await server.close()
        await site_runner.cleanup()
    assert done["status"] == "completed", done
    # fetch_url is idempotent (read-only): Signoff ran it again rather than report an unknown outcome.
    assert hits == [1, 2] and done["tool_calls"][0]["attempts"] == 2
    [result] = model.requests[1]["messages"][-1]["content"]
    assert result["tool_use_id"] == "toolu_get" and not result.get("is_error") and "status: green" in result["content"]
    assert len(model.requests) == 2 and model.rejections == []
