"""The Python client against the running server: every way a request ends, and a network that fails."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from signoff import (
    AsyncSignoffClient,
    Cancelled,
    Decision,
    Expired,
    ParamsChanged,
    Rejected,
    SignoffClient,
    SignoffRequestError,
    SignoffUnavailable,
    StillPending,
)
from tests.fakes.clock import FakeClock
from tests.fakes.flaky_proxy import FlakyProxy
from bot.sandbox import SlackEmulator
from bot.sandbox.signed import number_input, plain_input
from tests.support.app import API_TOKEN, ROOT, App, start_app
from bench.harness import free_port
from tests.client.helpers import cards, pending_id
from tests.approvals.timer_steps import tick

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
          "required": ["to", "amount"]}
PARAMS = {"to": "customer@example.com", "amount": 40}
ASK = {"summary": "Refund customer@example.com", "channel": "C1", "approvers": ["U1", "U2"]}


def client(url: str, **kw: Any) -> SignoffClient:
    return SignoffClient(url, API_TOKEN, **kw)


async def test_approve_returns_the_decision(app: App) -> None:
    asking = asyncio.create_task(asyncio.to_thread(
        client(app.url).request_approval, "refund", PARAMS, params_schema=SCHEMA, **ASK))
    request_id = await pending_id(app)
    await app.click(request_id, "U1", user_name="alice")
    decision = await asking
    assert isinstance(decision, Decision) and decision.approved and not decision.edited
    assert decision.request_id == request_id and decision.params == PARAMS
    assert decision.decided_by is not None and (decision.decided_by.id, decision.decided_by.name) == ("U1", "alice")
    assert decision.via == "button" and decision.decided_at is not None


async def test_edit_then_approve_returns_the_edited_params(app: App) -> None:
    async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
        asking = asyncio.create_task(signoff.request_approval("refund", PARAMS, params_schema=SCHEMA, **ASK))
        request_id = await pending_id(app)
        await app.click(request_id, "U1", action="signoff_edit", user_name="alice")
        [opened] = await app.slack.wait_for("views.open")
        view = opened.args["view"]
        await app.slack_client.view_submission(
            user="U1", user_name="alice", callback_id="signoff_edit", private_metadata=view["private_metadata"],
            values={"p:to": {"value": plain_input("billing@example.com")}, "p:amount": {"value": number_input("45")}})
        decision = await asking
    assert decision.params == {"to": "billing@example.com", "amount": 45} and decision.via == "modal"
    assert [(c.field, c.before, c.after) for c in decision.changes] == [
        ("to", "customer@example.com", "billing@example.com"), ("amount", 40, 45)]


async def test_reject_raises_with_the_reason_and_who(app: App) -> None:
    asking = asyncio.create_task(asyncio.to_thread(client(app.url).request_approval, "refund", PARAMS, **ASK))
    request_id = await pending_id(app)
    await app.click(request_id, "U2", action="signoff_reject", user_name="bob")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(
        user="U2", user_name="bob", callback_id="signoff_reject",
        private_metadata=opened.args["view"]["private_metadata"],
        values={"reason": {"value": plain_input("Wrong customer")}})
    with pytest.raises(Rejected) as caught:
        await asking
    assert caught.value.reason == "Wrong customer" and caught.value.by == "bob"
    assert caught.value.request_id == request_id and "Wrong customer" in str(caught.value)


async def test_cancel_ends_the_wait_and_a_late_cancel_returns_the_winner(app: App) -> None:
    signoff = client(app.url)
    handle = await asyncio.to_thread(signoff.submit, "refund", PARAMS, **ASK)
    assert handle.created and handle.decision is None
    waiting = asyncio.create_task(asyncio.to_thread(handle.wait))
    cancelled = await asyncio.to_thread(handle.cancel, "not needed any more")
    assert cancelled.outcome == "cancelled" and cancelled.comment == "not needed any more"
    with pytest.raises(Cancelled):
        await waiting
    # A second cancel loses to the first: it answers with that decision, not an error.
    again = await asyncio.to_thread(signoff.cancel, handle.id)
    assert again.outcome == "cancelled" and again.comment == "not needed any more"


async def test_the_callers_timeout_cancels_the_request_and_raises_expired(app: App) -> None:
    async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
        with pytest.raises(Expired) as caught:
            await signoff.request_approval("refund", PARAMS, timeout=0.2, **ASK)
        _, body = await app.api("GET", f"/api/v1/approvals/{caught.value.request_id}")
        assert body["status"] == "cancelled" and "no decision within 0.2s" in body["decision"]["comment"]
        with pytest.raises(StillPending):
            handle = await signoff.submit("refund", PARAMS, **ASK)
            await handle.wait(timeout=0.1)


async def test_server_timeout_raises_expired(db_url: str, slack: SlackEmulator) -> None:
    clock = FakeClock()
    app = await start_app(db_url, slack, clock=clock, SIGNOFF_SWEEP_SECONDS="3600")
    try:
        async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
            asking = asyncio.create_task(signoff.request_approval(
                "refund", PARAMS, timing={"timeout": "1h", "reminders": False}, **ASK))
            request_id = await pending_id(app)
            await app.card(request_id)
            await tick(app, clock, minutes=60)
            with pytest.raises(Expired) as caught:
                await asking
        assert caught.value.decision is not None and caught.value.decision.via == "timeout"
    finally:
        await app.stop()


async def test_a_dropped_connection_mid_wait_resumes_on_the_same_request(app: App, proxy: FlakyProxy) -> None:
    asking = asyncio.create_task(asyncio.to_thread(client(proxy.url).request_approval, "refund", PARAMS, **ASK))
    request_id = await pending_id(app)
    poll = f"GET /api/v1/approvals/{request_id}?wait="
    await proxy.wait_for(poll)
    proxy.drop_all()  # the long-poll's connection dies under it
    await proxy.wait_for(poll, count=2)  # the client is back, waiting on the same request
    await app.click(request_id, "U1", user_name="alice")
    decision = await asking
    assert decision.approved and decision.request_id == request_id
    assert proxy.seen("POST /api/v1/approvals") == 1
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [i["id"] for i in listing["items"]] == [request_id]


async def test_a_submit_retried_after_its_response_was_lost_makes_no_second_card(app: App, proxy: FlakyProxy) -> None:
    proxy.drop_response_of("POST /api/v1/approvals ")
    handle = await asyncio.to_thread(client(proxy.url).submit, "refund", PARAMS, **ASK)
    assert proxy.seen("POST /api/v1/approvals ") == 2  # the first answer was lost; the retry found it
    assert not handle.created  # the server recognised the idempotency key
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [i["id"] for i in listing["items"]] == [handle.id]
    await app.card(handle.id)
    await app.signoff.dispatcher.drain()  # type: ignore[union-attr]
    assert cards(app.slack) == 1


async def test_unreachable_server_and_bad_input_raise_clear_errors(app: App, caplog: pytest.LogCaptureFixture) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SignoffUnavailable) as down:
        await asyncio.to_thread(client(dead, retry_for=1).request_approval, "refund", PARAMS, **ASK)
    assert dead in str(down.value)
    with pytest.raises(SignoffUnavailable):  # still down: not said again
        await asyncio.to_thread(client(dead, retry_for=1).request_approval, "refund", PARAMS, **ASK)
    # Said at the first failure, not only when the retries run out; once while the server stays down.
    said = [r for r in caplog.records if r.name == "signoff" and r.levelname == "WARNING"]
    assert len(said) == 1 and f"Signoff at {dead} did not answer" in said[0].getMessage(), said
    assert "trying again for up to 1s" in said[0].getMessage()
    with pytest.raises(SignoffRequestError) as bad:
        await asyncio.to_thread(client(app.url).request_approval, "refund", PARAMS, summary="x", channel="nope")
    assert bad.value.status == 400 and "channel" in str(bad.value)
    with pytest.raises(SignoffRequestError) as unauthorized:
        await asyncio.to_thread(SignoffClient(app.url, "wrong-token").submit, "refund", PARAMS, **ASK)
    assert unauthorized.value.status == 401


async def test_ask_returns_the_answers(app: App) -> None:
    questions = [{"question": "Which environment?", "header": "Env", "options": ["staging", "production"]}]
    async with AsyncSignoffClient(app.url, API_TOKEN) as signoff:
        asking = asyncio.create_task(signoff.ask(questions, channel="C1", summary="Deploy"))
        request_id = await pending_id(app)
        card = await app.card(request_id)
        buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
        await app.slack_client.block_action(user="U1", user_name="alice", action_id=buttons[1]["action_id"],
                                            value=request_id, block_id="signoff_q0", channel=card.channel,
                                            message_ts=card.ts)
        answers = await asking
    assert answers["Which environment?"].selected == ("production",) and answers.decided_by is not None
    assert answers["Which environment?"].value == "production" and answers.decided_by.id == "U1"


def signoff_wait(url: str, *args: str) -> subprocess.Popen[str]:
    env = {"PATH": "/usr/bin:/bin", "SIGNOFF_URL": url, "SIGNOFF_TOKEN": API_TOKEN, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "bot", "wait", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


async def test_signoff_wait_exits_by_outcome(app: App) -> None:
    approved, rejected, cancelled = (await app.submit(), await app.submit(), await app.submit())
    procs = {r["id"]: signoff_wait(app.url, r["id"]) for r in (approved, rejected, cancelled)}
    await app.click(approved["id"], "U1", user_name="alice")
    await app.api("POST", f"/api/v1/approvals/{cancelled['id']}/cancel", json={})
    await app.click(rejected["id"], "U2", action="signoff_reject", user_name="bob")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(user="U2", user_name="bob", callback_id="signoff_reject",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"reason": {"value": plain_input("no")}})
    results = {}
    for request_id, proc in procs.items():
        out, err = await asyncio.to_thread(proc.communicate, timeout=60)
        results[request_id] = (proc.returncode, json.loads(out))
    assert results[approved["id"]][0] == 0 and results[approved["id"]][1]["decided_by"]["name"] == "alice"
    assert results[rejected["id"]][0] == 1 and results[rejected["id"]][1]["comment"] == "no"
    assert results[cancelled["id"]][0] == 2 and results[cancelled["id"]][1]["outcome"] == "cancelled"
    pending = await app.submit()
    still = signoff_wait(app.url, pending["id"], "--timeout", "0.1")
    out, err = await asyncio.to_thread(still.communicate, timeout=60)
    assert still.returncode == 3 and "still pending" in err


async def test_a_request_is_found_again_by_its_idempotency_key(app: App) -> None:
    signoff = client(app.url)
    handle = await asyncio.to_thread(signoff.submit, "refund", PARAMS, idempotency_key="refund-1234", **ASK)
    found = await asyncio.to_thread(signoff.find, "refund-1234")
    assert found is not None and found["id"] == handle.id
    assert await asyncio.to_thread(signoff.find, "never-used") is None


async def test_parameters_changed_behind_the_decision_are_refused(app: App) -> None:
    """The client runs nothing whose parameters do not hash to the decision's params_sha256."""
    from storage.schema import decisions

    handle = await asyncio.to_thread(client(app.url).submit, "refund", PARAMS, **ASK)
    await app.click(handle.id, "U1", user_name="alice")
    _, decided = await app.api("GET", f"/api/v1/approvals/{handle.id}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["params_sha256"]
    assert (await asyncio.to_thread(client(app.url).wait, handle.id)).params == PARAMS  # intact: accepted
    assert app.signoff is not None
    async with app.signoff.store.engine.begin() as conn:  # the stored parameters changed behind its back
        await conn.execute(decisions.update().where(decisions.c.request_id == handle.id).values(
            params={**PARAMS, "to": "attacker@example.com"}))
    with pytest.raises(ParamsChanged, match="params_sha256 differs"):
        await asyncio.to_thread(client(app.url).wait, handle.id)
