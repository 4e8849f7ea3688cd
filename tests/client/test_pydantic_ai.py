"""Pydantic AI's deferred tools decided in Slack: inline (the run waits) and ended-then-resumed in other
processes, exactly once; several calls of a step on one batch card; policy first.

Real pydantic-ai with its offline `FunctionModel`, the running Signoff, the fake Slack with signed clicks.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from pydantic_ai.tools import DeferredToolRequests

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import plain_input
from signoff import AsyncSignoffClient, SignoffError, StillPending
from signoff.pydantic_ai import Paused, SignoffApprovals
from tests.approvals.batch_steps import approve_selected, item_state, open_item, submit
from tests.client.helpers import cards, cards_once_posted, pending_id
from tests.client.pai_agents import CARD, TIDY, build, calls
from tests.client.test_langgraph import ITEM_EDIT, ITEM_REJECT, decided, submit_modal
from tests.support.app import API_TOKEN, ROOT, App, ShiftedClock, start_app
from tests.client.helpers import agent_process_env
from tests.support.policies import NEVER_DELETE_PROD, READS_ARE_FINE

POLICY = "rules:\n" + READS_ARE_FINE + NEVER_DELETE_PROD


@pytest.fixture
def pai_env(app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    return agent_process_env(app, "PAI_CALLS", tmp_path / "calls.jsonl", monkeypatch)


@pytest_asyncio.fixture
async def aclient(app: App) -> AsyncIterator[AsyncSignoffClient]:
    async with AsyncSignoffClient(app.url, API_TOKEN) as opened:
        yield opened


def inline(aclient: AsyncSignoffClient) -> SignoffApprovals:
    return SignoffApprovals(client=aclient, wait=None, **CARD)


def email(name: str, args: dict[str, str]) -> dict[str, object] | None:
    return {"kind": "email", "to": [args["to"]], "subject": args["subject"], "body": "(drafted by the agent)"} \
        if name == "send_email" else None


async def test_approved_inline_the_tool_runs_and_the_model_hears_it(app: App, pai_env: dict[str, str],
                                                                    aclient: AsyncSignoffClient) -> None:
    agent = build(SignoffApprovals(client=aclient, wait=None, preview=email, **CARD))
    running = asyncio.create_task(agent.run("Send the refund email"))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["action"]["name"] == "send_email" and body["summary"] == "Run send_email"
    assert body["action"]["params"] == {"to": "customer@example.com", "subject": "Your refund"}
    assert body["preview"]["kind"] == "email" and body["preview"]["subject"] == "Your refund"
    await app.click(request_id, "U1", user_name="alice")
    result = await asyncio.wait_for(running, 30)
    assert result.output == "send_email[success]: sent to customer@example.com: Your refund"
    assert body["session"] == result.conversation_id  # the run is the request's session: grants "for this run"
    assert calls() == [{"tool": "send_email", "args": {"to": "customer@example.com", "subject": "Your refund"}}]
    assert cards(app.slack) == 1


async def test_an_edit_is_what_the_tool_runs_with(app: App, pai_env: dict[str, str],
                                                  aclient: AsyncSignoffClient) -> None:
    agent = build(inline(aclient))
    running = asyncio.create_task(agent.run("Send the refund email"))
    request_id = await pending_id(app)
    body = await submit_modal(app, request_id, "signoff_edit", {
        "p:to": {"value": plain_input("customer@example.com")},
        "p:subject": {"value": plain_input("Your refund of $45")}})
    assert body["decision"]["changes"] == [{"field": "subject", "from": "Your refund", "to": "Your refund of $45"}]
    result = await asyncio.wait_for(running, 30)
    assert calls() == [{"tool": "send_email", "args": {"to": "customer@example.com", "subject": "Your refund of $45"}}]
    assert result.output == "send_email[success]: sent to customer@example.com: Your refund of $45"


async def test_a_rejection_reaches_the_model_with_the_reason_and_nothing_runs(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    agent = build(inline(aclient))
    running = asyncio.create_task(agent.run("Send the refund email"))
    request_id = await pending_id(app)
    await submit_modal(app, request_id, "signoff_reject", {"reason": {"value": plain_input("Not on a Sunday")}})
    result = await asyncio.wait_for(running, 30)
    assert calls() == []
    assert result.output == "send_email[denied]: alice rejected this call in Slack: Not on a Sunday"


async def test_ended_run_resumed_in_new_processes_by_two_resumers_runs_once(
        app: App, pai_env: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "paused.json"
    out = await run([sys.executable, "-m", "tests.client.pai_agents", "start", str(state)], pai_env)
    request_id = out.strip()
    paused = Paused.from_json(state.read_text())
    assert paused.request_id == request_id and [c.name for c in paused.calls] == ["send_email"]
    assert calls() == []  # the run ended: nothing ran, the card waits
    await submit_modal(app, request_id, "signoff_edit", {
        "p:to": {"value": plain_input("customer@example.com")},
        "p:subject": {"value": plain_input("Your refund of $45")}})
    resumer = [sys.executable, "-m", "tests.client.pai_agents", "resume", str(state)]
    outcomes = await asyncio.gather(run(resumer, pai_env), run(resumer, pai_env))
    assert sorted(o.strip() for o in outcomes) == [
        "resumed: send_email[success]: sent to customer@example.com: Your refund of $45", "taken"]
    assert calls() == [{"tool": "send_email", "args": {"to": "customer@example.com", "subject": "Your refund of $45"}}]
    assert (await run(resumer, pai_env)).strip() == "taken"  # never again, later either
    _, claim = await app.api("GET", f"/api/v1/resumes/{paused.claim_key}")
    assert claim["state"] == "done" and claim["request_ids"] == [request_id]
    assert cards(app.slack) == 1


async def test_resume_before_anyone_decided_runs_nothing(app: App, pai_env: dict[str, str],
                                                         aclient: AsyncSignoffClient) -> None:
    approvals = SignoffApprovals(client=aclient, **CARD)
    agent = build(approvals)
    result = await agent.run("Send the refund email")
    assert isinstance(result.output, DeferredToolRequests)
    paused = await approvals.pause(result)
    assert (await approvals.pause(result)).request_id == paused.request_id  # the handler's card, found again
    with pytest.raises(StillPending):
        await approvals.resume(agent, Paused.from_json(paused.to_json()))
    assert calls() == [] and await cards_once_posted(app, paused.request_id) == 1
    _, claim = await app.api("GET", f"/api/v1/resumes/pydantic-ai:{paused.request_id}")
    assert claim["error"]["code"] == "not_found"  # nothing was claimed either


async def test_several_calls_of_a_step_on_one_batch_card_each_decided_on_its_own(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    agent = build(inline(aclient), TIDY)
    running = asyncio.create_task(agent.run("Tidy up"))
    batch_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{batch_id}")
    assert [i["action"]["name"] for i in body["items"]] == ["send_email", "read_file", "delete_file"]
    assert body["summary"] == "Run 3 tool calls: send_email, read_file, delete_file"
    view = await open_item(app, batch_id, 0, ITEM_EDIT)
    await submit(app, view, {"p:to": {"value": plain_input("b@example.com")},
                             "p:subject": {"value": plain_input("Hi")}})
    await item_state(app, batch_id, 0)
    view = await open_item(app, batch_id, 2, ITEM_REJECT)
    await submit(app, view, {"reason": {"value": plain_input("Not the production database")}})
    await item_state(app, batch_id, 2)
    await approve_selected(app, batch_id, [1])
    decision = (await decided(app, batch_id))["decision"]
    assert [i["outcome"] for i in decision["items"]] == ["approved", "approved", "rejected"]
    result = await asyncio.wait_for(running, 30)
    # Pydantic AI runs a step's approved calls concurrently: in either order.
    assert sorted(calls(), key=lambda c: c["tool"]) == [{"tool": "read_file", "args": {"path": "/tmp/report.txt"}},
                                                        {"tool": "send_email", "args": {"to": "b@example.com",
                                                                                        "subject": "Hi"}}]
    assert sorted(result.output.split(" | ")) == [
        "delete_file[denied]: alice rejected this call in Slack: Not the production database",
        "read_file[success]: read /tmp/report.txt", "send_email[success]: sent to b@example.com: Hi"]
    assert cards(app.slack) == 1


@pytest.mark.policy(POLICY)
async def test_policy_first_allowed_calls_run_denied_never_and_only_the_rest_is_asked(
        papp: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAI_CALLS", str(tmp_path / "calls.jsonl"))
    async with AsyncSignoffClient(papp.url, API_TOKEN) as client:
        approvals = SignoffApprovals(client=client, **CARD)  # wait=0: ends the run only for a person's call
        agent = build(approvals, TIDY)
        result = await agent.run("Tidy up")
        assert calls() == [{"tool": "read_file", "args": {"path": "/tmp/report.txt"}}]  # allowed: ran in the run
        assert isinstance(result.output, DeferredToolRequests)
        assert [c.tool_name for c in result.output.approvals] == ["send_email"]  # the only call a person decides
        paused = await approvals.pause(result)
        _, listed = await papp.api("GET", "/api/v1/approvals")
        by_name = {r["action"]["name"]: r for r in listed["items"]}
        assert {n: (r["status"], (r["decision"] or {}).get("via")) for n, r in by_name.items()} == {
            "read_file": ("approved", "policy"), "delete_file": ("rejected", "policy"), "send_email": ("pending", None)}
        assert by_name["send_email"]["id"] == paused.request_id
        await papp.card(paused.request_id)  # the card is posted by the outbox, after the submit's answer
        assert cards(papp.slack) == 1  # one single card: the policy-decided calls were never shown to anyone
        await papp.click(paused.request_id, "U1", user_name="alice")
        resumed = await approvals.resume(agent, paused, wait=10)
    assert calls()[1:] == [{"tool": "send_email", "args": {"to": "a@example.com", "subject": "Hi"}}]
    assert "delete_file[denied]: Signoff's policy does not allow this call: " in resumed.output
    assert "prod is deleted by people only" in resumed.output
    assert "read_file[success]: read /tmp/report.txt" in resumed.output


async def run(cmd: list[str], env: dict[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    return out.decode()



CRITICAL_DELETES = """\
tiers:
  high:
    approvers: [U1]
  critical:
    approvers: [U1, U2, U3]
    quorum: 2
rules:
  - name: deletes-are-critical
    tool: delete_*
    tier: critical
"""


@pytest.mark.policy(CRITICAL_DELETES)
async def test_a_call_a_batch_cannot_carry_gets_its_own_card_and_the_step_resumes_once_both_are_decided(
        papp: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAI_CALLS", str(tmp_path / "calls.jsonl"))
    wanted = [TIDY[0], TIDY[2]]  # send_email (high) and delete_file (critical: a quorum of 2)
    async with AsyncSignoffClient(papp.url, API_TOKEN) as client:
        approvals = SignoffApprovals(client=client, **CARD)
        agent = build(approvals, wanted)
        result = await agent.run("Tidy up")
        paused = await approvals.pause(result)
        assert len(paused.asked) == 2  # not_batchable: one card per call
        assert await cards_once_posted(papp, *paused.request_ids) == 2
        send_id, delete_id = paused.request_ids
        assert (await papp.api("GET", f"/api/v1/approvals/{delete_id}"))[1]["quorum"] == 2
        await papp.click(send_id, "U1", user_name="alice")
        await decided(papp, send_id)
        with pytest.raises(StillPending):  # the step goes on only once every call of it is decided
            await approvals.resume(agent, paused)
        await submit_modal(papp, delete_id, "signoff_reject", {"reason": {"value": plain_input("Keep it")}})
        resumed = await approvals.resume(agent, Paused.from_json(paused.to_json()))
        assert await approvals.resume(agent, paused) is None  # once
    assert calls() == [{"tool": "send_email", "args": {"to": "a@example.com", "subject": "Hi"}}]
    assert sorted(resumed.output.split(" | ")) == ["delete_file[denied]: alice rejected this call in Slack: Keep it",
                                                   "send_email[success]: sent to a@example.com: Hi"]


async def test_an_inline_wait_that_runs_out_ends_the_run_and_its_card_is_continued_later(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    approvals = SignoffApprovals(client=aclient, wait=0.2, **CARD)
    agent = build(approvals)
    result = await agent.run("Send the refund email")  # nobody decides in 0.2 s: the run ends, the card stays
    assert isinstance(result.output, DeferredToolRequests) and calls() == []
    paused = await approvals.pause(result)
    assert await cards_once_posted(app, paused.request_id) == 1  # pause found the card the run posted
    await app.click(paused.request_id, "U1", user_name="alice")
    resumed = await approvals.resume(agent, paused, wait=10)
    assert resumed.output == "send_email[success]: sent to customer@example.com: Your refund"
    assert len(calls()) == 1


async def test_a_card_nobody_can_see_is_cancelled_and_the_call_denied(app: App, pai_env: dict[str, str],
                                                                      aclient: AsyncSignoffClient) -> None:
    approvals = SignoffApprovals(client=aclient, wait=None, channel="C0123NOWHERE")  # Slack knows no such channel
    result = await asyncio.wait_for(build(approvals).run("Send the refund email"), 30)
    assert calls() == []
    assert result.output.startswith("send_email[denied]: The approval request was cancelled: its card could not be "
                                    "posted in Slack (channel_not_found)"), result.output
    _, listed = await app.api("GET", "/api/v1/approvals?status=cancelled")
    assert len(listed["items"]) == 1


def test_importing_the_adapter_loads_no_pydantic_ai_and_a_bad_pause_file_is_refused() -> None:
    code = "import sys, signoff.pydantic_ai; print('pydantic_ai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "client")})
    assert out.stdout.strip() == "False"
    with pytest.raises(SignoffError, match="not a paused Pydantic AI run"):
        Paused.from_json('{"format": "something else"}')
    with pytest.raises(SignoffError, match="wait must be 0 or more"):
        SignoffApprovals(wait=-1)


async def test_a_resume_taken_over_from_a_dead_resumer_does_not_run_the_approved_call_again(
        db_url: str, slack: SlackEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAI_CALLS", str(tmp_path / "calls.jsonl"))
    clock = ShiftedClock()
    app = await start_app(db_url, slack, clock=clock)
    try:
        async with AsyncSignoffClient(app.url, API_TOKEN) as client:
            approvals = SignoffApprovals(client=client, **CARD)
            agent = build(approvals)
            paused = await approvals.pause(await agent.run("Send the refund email"))
            await app.click(paused.request_id, "U1", user_name="alice")
            await decided(app, paused.request_id)
            # What a resumer that died mid-run leaves behind: its claim, `resuming`, its lease running.
            dead = await client.claim_resume(paused.claim_key, "host-a|4242|dead", lease_seconds=60,
                                             request_ids=paused.request_ids)
            assert dead is not None
            assert await approvals.resume(agent, paused) is None  # its lease still runs: left alone
            clock.advance(61)  # the dead resumer's lease runs out on the server's clock
            resumed = await approvals.resume(agent, paused)
            assert await approvals.resume(agent, paused) is None
        assert calls() == []  # approved, but maybe run by the dead resumer: not run again
        assert resumed.output.startswith("send_email[denied]: Not run again: this call was approved, but the "
                                         "process resuming it stopped"), resumed.output
        _, claim = await app.api("GET", f"/api/v1/resumes/{paused.claim_key}")
        assert claim["state"] == "done" and claim["owner"] != "host-a|4242|dead"
    finally:
        await app.stop()
