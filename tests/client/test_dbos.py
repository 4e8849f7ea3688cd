"""DBOS workflows wait for a person's decision and continue exactly once across a killed worker.

The recipe of docs/integrations/dbos.md runs as pasted: a worker process (this venv's Python, its own
folder, no PYTHONPATH) on a DBOS system database that is a SQLite file, and a PostgreSQL database
when SIGNOFF_TEST_DATABASE_URL names a server. It starts the refund workflow and is SIGKILLed while
the workflow waits; a person edits the amount and approves through the Slack emulator while no worker
runs; the worker starts again, DBOS recovers the workflow, Signoff's retried webhook wakes it, and the
refund is paid once, with the edited amount. Side effects are counted in the file the step appends to.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.api.webhooks import sign
from bot.approvals.keys import Signer
from bot.sandbox import SlackEmulator
from bot.sandbox.signed import number_input, plain_input
from tests.support.docs import doc_example
from tests.client.dbos_worker import Worker, dbos_url, recorded, steps
from tests.client.helpers import cards, pending_id
from tests.client.test_langgraph import submit_modal
from tests.support.app import TEST_SIGNING_KEY, WEBHOOK_SECRET, App, start_app
from tests.support.waits import until

__all__ = ["dbos_url"]  # the fixture, parametrized over the DBOS engines

WORKFLOW = "refund-A-1042"


# Signoff as the sandbox page tells you to start it for DBOS: webhooks signed and allowed to reach a
# worker on loopback. A webhook that failed is retried at most a second later (the default backs off
# up to 30 minutes), so the restarted worker gets it within the test's patience.
pytestmark = pytest.mark.settings(SIGNOFF_EGRESS_ALLOW="127.0.0.1", SIGNOFF_WEBHOOK_BACKOFF_CAP_SECONDS="1")


def paid(folder: Path) -> list[str]:
    """The refunds the gated step made, one line each."""
    log = folder / "refunds.log"
    return log.read_text().splitlines() if log.exists() else []


async def audit(app: App, request_id: str) -> list[str]:
    assert app.signoff is not None
    return [e.type for e in await app.signoff.store.audit_events(request_id)]


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as resp:
        return resp.status, await resp.json()


async def raw_status(port: int, header: str) -> int:
    """The status a POST with only this body header gets (no body is sent)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"POST /signoff/webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n{header}\r\n\r\n".encode())
        await writer.drain()
        return int((await asyncio.wait_for(reader.readline(), 10)).split()[1])
    finally:
        writer.close()


def signed(body: bytes, secret: str = WEBHOOK_SECRET, at: int | None = None) -> dict[str, str]:
    timestamp = str(int(time.time()) if at is None else at)
    return {"Content-Type": "application/json", "X-Signoff-Timestamp": timestamp,
            "X-Signoff-Signature": sign(secret, timestamp, body), "X-Signoff-Delivery": "test"}


@pytest_asyncio.fixture
async def refunds(app: App, dbos_url: str, tmp_path: Path) -> AsyncIterator[Worker]:
    """The docs' DBOS refunds recipe as a worker of its own (not started), stopped at the end."""
    folder = tmp_path / "worker"
    folder.mkdir()
    (folder / "refunds.py").write_text(doc_example("dbos-refunds"))
    worker = Worker(folder, "refunds.py", app, dbos_url)
    try:
        yield worker
    finally:
        worker.stop()


async def test_the_recipe_killed_while_it_waits_pays_the_edited_refund_once(app: App, dbos_url: str,
                                                                            refunds: Worker) -> None:
    worker, folder = refunds, refunds.folder
    await worker.start("A-1042", "40")
    request_id = await pending_id(app)
    _, request = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert request["action"]["params"] == {"order": "A-1042", "amount": 40}
    assert request["callback_url"] == f"{worker.url}?dbos_workflow={WORKFLOW}"
    await app.card(request_id)
    # Waiting: the submit is recorded and the wait's durable timeout is set.
    assert (await recorded(dbos_url, WORKFLOW, "DBOS.sleep"))[:2] == ["signoff.submit", "DBOS.sleep"]

    # A POST that Signoff did not sign reaches nothing, even one that says "approved".
    forged = json.dumps({"type": "approval.decided", "request": {
        **request, "status": "approved", "callback_url": request["callback_url"],
        "decision": {"outcome": "approved", "params": {"order": "A-1042", "amount": 99}}}}).encode()
    assert (await post(worker.url, forged, signed(forged, "not-the-secret")))[0] == 401
    assert (await post(worker.url, forged, signed(forged, at=int(time.time()) - 3600)))[0] == 401  # replayed
    assert (await post(worker.url, forged, {"Content-Type": "application/json"}))[0] == 401

    worker.kill()
    body = await submit_modal(app, request_id, "signoff_edit", {
        "p:order": {"value": plain_input("A-1042")}, "p:amount": {"value": number_input("35")}})
    assert body["status"] == "approved" and body["decision"]["params"] == {"order": "A-1042", "amount": 35}
    assert paid(folder) == []  # nobody was there to act on it

    await worker.start()  # no arguments: the worker alone, as after a crash
    await worker.until(lambda: len(paid(folder)) >= 1, "the refund")
    await worker.until(lambda: any("refunds: refunded" in line for line in worker.lines()), "its line")
    assert paid(folder) == [f"{WORKFLOW} A-1042 35"]
    assert "refunds: refunded $35 on A-1042, approved by alice" in worker.lines()
    recorded_steps = await recorded(dbos_url, WORKFLOW, "pay_refund")
    assert "signoff.poll" not in recorded_steps  # the webhook woke it, not the fallback poll
    assert recorded_steps.count("signoff.submit") == 1 and recorded_steps.count("pay_refund") == 1
    await recorded(dbos_url, WORKFLOW, "signoff.report")  # the receipt's step, after pay_refund's
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["outcome_status"] == "ran" and body["outcome"]["params"] == {"order": "A-1042", "amount": 35}
    assert body["outcome"]["same_params"] and body["outcome"]["result"] == "refunded $35 on A-1042"
    events = await audit(app, request_id)
    assert "webhook_delivered" in events and "webhook_failed" not in events
    assert cards(app.slack) == 1

    # Killed again and restarted: nothing is paid twice, no second card.
    worker.kill()
    await worker.start()
    assert paid(folder) == [f"{WORKFLOW} A-1042 35"] and cards(app.slack) == 1
    # A redelivery of the same decision (Signoff's retries, or /redeliver) finds nothing left to do.
    status, _ = await app.api("POST", f"/api/v1/approvals/{request_id}/redeliver")
    assert status == 202
    async def redelivered() -> bool:
        return (await audit(app, request_id)).count("webhook_delivered") == 2

    await until(redelivered, "the redelivery to be delivered")
    assert paid(folder) == [f"{WORKFLOW} A-1042 35"]
    assert (await steps(dbos_url, WORKFLOW)).count("pay_refund") == 1
    assert (await steps(dbos_url, WORKFLOW)).count("signoff.report") == 1  # reported once, however recovered
    assert "run_ran" in await audit(app, request_id)

    # The same order started again: not run twice, and the worker says so instead of nothing.
    worker.kill()
    await worker.start("A-1042", "40")
    assert "refunds: A-1042 was handled already (SUCCESS: refunded $35 on A-1042); a new order number starts a " \
        "new refund" in worker.lines(), worker.lines()
    assert paid(folder) == [f"{WORKFLOW} A-1042 35"] and cards(app.slack) == 1


def forget_every_step(dbos_url: str, workflow_id: str) -> int:
    """What DBOS has on disk for a worker killed after its submit's POST landed and before DBOS recorded
    the step: the workflow, pending, with no step recorded. Returns how many records were dropped."""
    from sqlalchemy import create_engine, text

    sqlite = dbos_url.startswith("sqlite")
    engine = create_engine(dbos_url if sqlite else dbos_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            table = "operation_outputs" if sqlite else "dbos.operation_outputs"
            return conn.execute(text(f"DELETE FROM {table} WHERE workflow_uuid = :w"), {"w": workflow_id}).rowcount
    finally:
        engine.dispose()


async def test_a_worker_killed_between_its_submit_and_dbos_recording_it_asks_once(app: App, dbos_url: str,
                                                                                  refunds: Worker) -> None:
    worker, folder = refunds, refunds.folder
    await worker.start("A-1042", "40")
    request_id = await pending_id(app)
    await recorded(dbos_url, WORKFLOW, "DBOS.sleep")
    worker.kill()
    assert await asyncio.to_thread(forget_every_step, dbos_url, WORKFLOW) >= 2
    await worker.start()  # recovery runs the submit step again: the same key finds the same request
    assert (await recorded(dbos_url, WORKFLOW, "DBOS.sleep"))[:1] == ["signoff.submit"]
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [r["id"] for r in listing["items"]] == [request_id]
    await app.click(request_id, "U1", user_name="alice")
    await worker.until(lambda: len(paid(folder)) >= 1, "the refund")
    assert paid(folder) == [f"{WORKFLOW} A-1042 40"] and cards(app.slack) == 1


async def test_a_rejected_refund_is_never_paid_and_the_endpoint_takes_only_what_it_can_use(
        app: App, dbos_url: str, refunds: Worker) -> None:
    worker, folder = refunds, refunds.folder
    await worker.start("A-7", "70")
    request_id = await pending_id(app)
    _, request = await app.api("GET", f"/api/v1/approvals/{request_id}")
    base = worker.url

    async def signed_post(event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raw = json.dumps(event).encode()
        return await post(base, raw, signed(raw))

    # Signed as the server signs decisions (the worker's client pinned its key): the endpoint's own checks are
    # what this test is about. `callback_url` is not covered by the signature.
    decided = Signer.from_seed(TEST_SIGNING_KEY).sign(
        {**request, "status": "approved", "decision": {"outcome": "approved", "params": {}}})
    status, answer = await signed_post({"type": "approval.decided", "request": {**decided, "callback_url": None}})
    assert status == 400 and "names no DBOS workflow" in answer["error"]
    elsewhere = {**decided, "callback_url": f"{base}?dbos_workflow=refund-nobody"}
    status, answer = await signed_post({"type": "approval.decided", "request": elsewhere})
    assert status == 404 and "refund-nobody" in answer["error"]
    assert (await signed_post({"type": "approval.reminded", "request": decided}))[0] == 200  # not waited for
    assert (await signed_post({"type": "approval.decided", "request": request}))[0] == 200  # still pending
    assert (await post(base.replace("/signoff/webhook", "/other"), b"{}", signed(b"{}")))[0] == 404
    async with aiohttp.ClientSession() as session, session.get(base) as resp:
        assert resp.status == 405
    assert await raw_status(worker.port, "Content-Length: 2000000") == 413  # refused before it is read
    assert await raw_status(worker.port, "Transfer-Encoding: chunked") == 411

    before = len(app.slack.calls_to("views.open"))
    await app.click(request_id, "U1", action="signoff_reject", user_name="alice")
    view = (await app.slack.wait_for("views.open", count=before + 1))[-1].args["view"]
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id=view["callback_id"],
                                           private_metadata=view["private_metadata"],
                                           values={"reason": {"value": plain_input("already refunded")}})
    await worker.until(lambda: any("not refunded" in line for line in worker.lines()), "the workflow's end")
    assert "refunds: A-7 not refunded: rejected by alice: already refunded" in worker.lines()
    assert paid(folder) == []
    assert "pay_refund" not in await steps(dbos_url, "refund-A-7")


POLLING_WORKER = '''
import os
import sys
import threading

from dbos import DBOS, SetWorkflowID

from signoff import SignoffError
from signoff.dbos import approval, serve_webhooks

PORT = int(os.environ["WORKER_PORT"])
DBOS(config={"name": "gated", "system_database_url": os.environ["DBOS_SYSTEM_DATABASE_URL"]})
CHANNEL = os.environ["SIGNOFF_CHANNEL"]


@DBOS.step()
def act(n: int) -> None:
    with open("acted.log", "a") as log:
        log.write(f"{n}\\n")


@DBOS.workflow()
def gated(n: int, timeout: float | None) -> None:
    try:
        decision = approval("act", {"n": n}, summary=f"Act on {n}", channel=CHANNEL, timeout=timeout,
                            callback_url=f"http://127.0.0.1:{PORT}/signoff/webhook", poll_every=1, poll_max=2)
    except SignoffError as no:
        print(f"not acted: {type(no).__name__}: {no}", flush=True)
        return
    act(**decision.params)


if __name__ == "__main__":
    DBOS.launch()
    serve_webhooks(PORT)
    if len(sys.argv) > 1:
        with SetWorkflowID(f"gated-{sys.argv[1]}"):
            DBOS.start_workflow(gated, int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else None)
    print("worker ready", flush=True)
    threading.Event().wait()
'''


@pytest_asyncio.fixture
async def lossy_app(db_url: str, slack: SlackEmulator) -> AsyncIterator[App]:
    """Signoff giving up on a webhook after one failed attempt: a decision made while the worker is down
    never reaches it by webhook."""
    running = await start_app(db_url, slack, SIGNOFF_EGRESS_ALLOW="127.0.0.1", SIGNOFF_WEBHOOK_MAX_ATTEMPTS="1")
    try:
        yield running
    finally:
        await running.stop()


async def test_a_lost_webhook_is_found_by_the_fallback_poll_at_a_bounded_rate(lossy_app: App, dbos_url: str,
                                                                             tmp_path: Path) -> None:
    app = lossy_app
    (tmp_path / "gated.py").write_text(POLLING_WORKER)
    worker = Worker(tmp_path, "gated.py", app, dbos_url)
    try:
        await worker.start("7")
        request_id = await pending_id(app)
        await recorded(dbos_url, "gated-7", "signoff.poll")
        began = time.monotonic()
        await asyncio.sleep(4)  # deliberate: a window for the fallback poll's pace under test (1 s, then 2 s apart)
        polls = (await steps(dbos_url, "gated-7")).count("signoff.poll")
        assert 1 <= polls <= (time.monotonic() - began) / 2 + 2, polls
        worker.kill()
        await app.click(request_id, "U1", user_name="alice")
        async def gave_up() -> bool:
            return "webhook_failed" in await audit(app, request_id)

        await until(gave_up, "the outbox to try the dead worker once, then give up")

        await worker.start()
        await worker.until(lambda: (tmp_path / "acted.log").exists(), "the gated step")
        assert (tmp_path / "acted.log").read_text() == "7\n"
        assert "webhook_delivered" not in await audit(app, request_id)
        assert (await steps(dbos_url, "gated-7")).count("act") == 1
    finally:
        worker.stop()


async def test_the_callers_timeout_cancels_the_request_and_nothing_runs(app: App, dbos_url: str,
                                                                        tmp_path: Path) -> None:
    (tmp_path / "gated.py").write_text(POLLING_WORKER)
    worker = Worker(tmp_path, "gated.py", app, dbos_url)
    try:
        await worker.start("8", "2")
        request_id = await pending_id(app)
        await worker.until(lambda: any("not acted" in line for line in worker.lines()), "the timeout", timeout=30)
        assert "not acted: Expired: no decision within 2s; the request was cancelled" in worker.lines()
        _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
        assert body["status"] == "cancelled"
        assert not (tmp_path / "acted.log").exists()
    finally:
        worker.stop()


async def test_a_card_slack_refused_ends_the_wait_as_cancelled(app: App, dbos_url: str, tmp_path: Path) -> None:
    (tmp_path / "gated.py").write_text(POLLING_WORKER)
    worker = Worker(tmp_path, "gated.py", app, dbos_url, channel="CNOWHERE")  # a channel Slack does not know
    try:
        await worker.start("9")
        request_id = await pending_id(app)
        await worker.until(lambda: any("not acted" in line for line in worker.lines()), "the end of the wait")
        [said] = [line for line in worker.lines() if "not acted" in line]
        assert said.startswith("not acted: Cancelled: its card could not be posted in Slack (channel_not_found)")
        _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
        assert body["status"] == "cancelled"
        assert not (tmp_path / "acted.log").exists()
    finally:
        worker.stop()
