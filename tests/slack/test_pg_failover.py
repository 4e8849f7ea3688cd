"""PostgreSQL stopped and started again while people click: no acked click is lost or doubled, and
Signoff recovers without a restart.

Runs its own PostgreSQL (initdb/pg_ctl as the postgres user, on a free port under a temp dir): the
shared server is other tests' too. Skipped, visibly, where PostgreSQL's binaries or the postgres
user are missing.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa

from bench.harness import free_port
from bot.sandbox import SlackEmulator
from bot.sandbox.signed import SlackClient
from storage.migrate import upgrade
from storage.schema import audit_events
from storage.stores import open_store
from tests.process.chaos import Receiver
from tests.slack.test_acked_clicks import ENV, api, cards, decisions_of, until
from tests.support.app import SIGNING_SECRET
from tests.support.needs import cannot_run
from tests.support.process import ServerProcess

pytestmark = pytest.mark.chaos

PG_BIN = Path(os.environ.get("SIGNOFF_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
CLICKS = 16


class PrivatePostgres:
    def __init__(self, root: Path) -> None:
        self.data = root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.log = root / "postgres.log"

    def _as_postgres(self, *argv: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        self._as_postgres(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust")

    def start(self) -> None:
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "start", "-o",
                          f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off")

    def stop(self) -> None:
        self._as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    if not (PG_BIN / "initdb").exists() or not shutil.which("runuser"):
        cannot_run(f"PostgreSQL's initdb/pg_ctl are not in {PG_BIN} (SIGNOFF_TEST_PG_BIN), or runuser is missing")
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        cannot_run("no postgres user to run a private PostgreSQL as")
    root = Path(tempfile.mkdtemp(prefix="signoff-private-pg-"))  # pytest's own tmp is root's alone
    os.chown(root, user.pw_uid, user.pw_gid)
    pg = PrivatePostgres(root)
    pg.init()
    pg.start()
    try:
        yield pg
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(pg.data), "-m",
                        "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


async def test_postgres_restarted_mid_clicks_loses_and_doubles_nothing(
        private_pg: PrivatePostgres, tmp_path: Path) -> None:
    await upgrade(private_pg.url)
    slack = SlackEmulator()
    await slack.start()
    slack.add_channel("C1", "approvals")
    for i in range(1, CLICKS + 1):
        slack.add_user(f"U{i}", f"person{i}")
    receiver = Receiver()
    await receiver.start()
    server = ServerProcess(private_pg.url, slack, **ENV)
    await server.start(tmp_path)
    acked: list[str] = []
    try:
        async with aiohttp.ClientSession() as session, SlackClient(server.url, SIGNING_SECRET, fake=slack) as clicker:
            open_cards = await cards(session, server, slack, receiver.url, CLICKS)

            async def click_until_acked(i: int, request_id: str, card: Any) -> None:
                while True:  # a person whose click Slack showed as failed clicks again
                    try:
                        answer = await clicker.block_action(user=f"U{i}", action_id="signoff_approve", value=request_id,
                                                            block_id="decide", channel=card.channel, message_ts=card.ts)
                    except aiohttp.ClientError:
                        answer = None
                    if answer is not None and answer.status == 200:
                        acked.append(request_id)
                        return
                    await asyncio.sleep(0.1)  # test-side: a person's pause before clicking again

            half = CLICKS // 2
            for i, (request_id, card) in enumerate(open_cards[:half], start=1):
                await click_until_acked(i, request_id, card)
            await asyncio.to_thread(private_pg.stop)
            outage = asyncio.gather(*(click_until_acked(i, request_id, card) for i, (request_id, card)
                                      in enumerate(open_cards[half:], start=half + 1)))
            await until(lambda: _logged(server, "cannot reach the database"), "the outage logged")
            await asyncio.to_thread(private_pg.start)
            await asyncio.wait_for(outage, 120)
            ids = [request_id for request_id, _ in open_cards]

            async def all_decided() -> dict[str, Any] | None:
                seen = await decisions_of(session, server, ids)
                return seen if all(seen.values()) else None

            seen = await until(all_decided, "every acked click decided after the outage", timeout=120)
            assert [seen[r]["decided_by"]["id"] for r in ids] == [f"U{i}" for i in range(1, CLICKS + 1)]
            status, health = await api(session, server, "GET", "/healthz")
            assert status == 200, health  # recovered without a restart
    finally:
        server.stop()
        await receiver.stop()
        await slack.stop()
    assert sorted(acked) == sorted(ids)
    store = await open_store(private_pg.url)
    try:
        async with store.engine.connect() as conn:
            decided = (await conn.execute(sa.select(audit_events.c.request_id, sa.func.count())
                                          .where(audit_events.c.type == "decided")
                                          .group_by(audit_events.c.request_id))).all()
    finally:
        await store.close()
    assert {r: n for r, n in decided} == dict.fromkeys(ids, 1)
    cards_posted = [m for m in slack.messages.values() if (m.metadata or {}).get("event_type") == "signoff_card"]
    assert len(cards_posted) == CLICKS
    log = server.log_path.read_text() if server.log_path else ""
    assert log.count("cannot reach the database") == 1, log[-3000:]


async def _logged(server: ServerProcess, text: str) -> bool:
    return bool(server.log_path and text in server.log_path.read_text())
