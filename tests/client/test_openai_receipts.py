"""After the click, OpenAI Agents SDK runs (issues 36 and 37): a resumed run reports what its approved calls
did (the card's footer and `GET /api/v1/approvals/{id}` show it), its policy checks carry the run so a
grant "for this run" applies, and a decision altered on the way is refused with nothing run.

The real `openai-agents` on `agents.testing.ScriptedModel`, the running Signoff, signed Slack clicks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from agents import Agent, Runner
from agents.testing import ScriptedModel

import signoff.signatures as sig
from bot.sandbox.signed import plain_input
from signoff import AsyncSignoffClient, SignatureInvalid
from signoff.openai import Approvals
from tests.api.test_signed_decisions import altered, public_key, when_decided
from tests.approvals.batch_steps import approve_selected, item_state, open_item, submit
from tests.client.helpers import card_text, receipt
from tests.client.oa_agents import build, calls, done, email, function_call
from tests.client.test_langgraph import decided, submit_modal
from tests.client.test_openai_agents import POLICY, approvals, oa_env, started
from tests.fakes.tamper_proxy import TamperProxy
from tests.slack.test_grants_flow import remember
from tests.support.app import API_TOKEN, App

__all__ = ["approvals", "oa_env"]  # fixtures, used by name

pytestmark = pytest.mark.policy(POLICY)


async def test_an_approved_call_reports_that_it_ran_to_the_api_and_the_card(papp: App, approvals: Approvals) -> None:
    agent, _, request_id = await started(approvals, [[email()], done("Sent.")], "receipt-1")
    assert (await receipt(papp, request_id))["outcome_status"] is None  # nothing approved yet
    await papp.click(request_id, "U1", user_name="alice")
    assert (await decided(papp, request_id))["outcome_status"] == "not_reported"
    assert await approvals.resume(agent, "receipt-1") is not None
    body = await receipt(papp, request_id)
    assert body["outcome_status"] == "ran"
    assert body["outcome"]["params"] == {"to": "c@example.com", "subject": "Your refund"}
    assert body["outcome"]["same_params"] and body["outcome"]["result"] == "sent to c@example.com: Your refund"
    assert "with the approved parameters" in await card_text(papp, request_id)


async def test_an_edited_call_reports_the_edited_parameters_it_ran_with(papp: App, approvals: Approvals) -> None:
    agent, _, request_id = await started(approvals, [[email()], done()], "receipt-edit")
    await submit_modal(papp, request_id, "signoff_edit", {"p:to": {"value": plain_input("c@example.com")},
                                                           "p:subject": {"value": plain_input("Refund: $45")}})
    assert await approvals.resume(agent, "receipt-edit") is not None
    body = await receipt(papp, request_id)
    assert body["outcome"]["params"] == {"to": "c@example.com", "subject": "Refund: $45"} == body["decision"]["params"]
    assert body["outcome"]["same_params"] and body["action"]["params"]["subject"] == "Your refund"


async def test_a_tool_that_raises_reports_failed_with_its_error(papp: App, approvals: Approvals) -> None:
    @approvals.tool
    def charge(amount: int) -> str:
        """Charge the customer's card."""
        raise RuntimeError("card declined")

    agent = Agent(name="biller", tools=[charge], model=ScriptedModel(
        [[function_call("charge", {"amount": 5}, call_id="call_charge")], done("It failed.")]))
    paused = await approvals.pause(await Runner.run(agent, "Charge it"), "receipt-fail")
    assert paused is not None
    [request_id] = paused.request_ids
    await papp.click(request_id, "U1", user_name="alice")
    await decided(papp, request_id)
    assert (await approvals.resume(agent, "receipt-fail")) is not None  # the SDK tells the model the tool failed
    body = await receipt(papp, request_id)
    assert body["outcome_status"] == "failed" and "RuntimeError: card declined" in body["outcome"]["error"]
    assert "failed when run" in await card_text(papp, request_id)


async def test_a_batch_reports_the_approved_call_under_its_item_and_nothing_for_the_rejected_one(
        papp: App, approvals: Approvals) -> None:
    steps = [[email(), function_call("delete_file", {"path": "/tmp/report.txt"}, call_id="call_rm")], done()]
    agent, _, batch_id = await started(approvals, steps, "receipt-batch")
    view = await open_item(papp, batch_id, 1, "signoff_item_reject")
    await submit(papp, view, {"reason": {"value": plain_input("Keep the report")}})
    await item_state(papp, batch_id, 1)
    await approve_selected(papp, batch_id, [0])
    await decided(papp, batch_id)
    assert await approvals.resume(agent, "receipt-batch") is not None
    body = await receipt(papp, batch_id)
    mail_key, rm_key = (i["key"] for i in body["decision"]["items"])
    assert body["outcome"]["items"][mail_key]["status"] == "ran" and rm_key not in body["outcome"]["items"]
    assert body["outcome_status"] == "reported" and [c["tool"] for c in calls()] == ["send_email"]


async def test_a_grant_for_this_run_lets_its_next_call_through_and_no_other_runs(papp: App,
                                                                                 approvals: Approvals) -> None:
    """The policy check names the run (its `session`): "This agent run only" on the card applies to it."""
    agent, _, request_id = await started(approvals, [[email()], [email(call_id="call_mail_2")], done("Twice.")],
                                         "granted-run")
    _, asked = await papp.api("GET", f"/api/v1/approvals/{request_id}")
    assert asked["session"] == "granted-run"
    await remember(papp, request_id, "U1", widen=[], scope="run", duration="1h")
    await decided(papp, request_id)
    result = await approvals.resume(agent, "granted-run")
    assert result is not None and result.final_output == "Twice." and result.interruptions == []
    assert len(calls()) == 2  # the second call of the run went through on the grant, with no card
    other, _ = build(approvals, [[email()]])
    elsewhere = await Runner.run(other, "Again", context=approvals.context("another-run"))
    assert len(elsewhere.interruptions) == 1  # another run is asked again


@pytest_asyncio.fixture
async def proxy(papp: App) -> AsyncIterator[TamperProxy]:
    running = await TamperProxy(papp.url).start()
    try:
        yield running
    finally:
        await running.stop()


async def test_an_altered_decision_is_refused_and_no_call_runs(papp: App, oa_env: dict[str, str],
                                                                proxy: TamperProxy, tmp_path: Path) -> None:
    sig.reset({"SIGNOFF_PUBLIC_KEY": await public_key(papp)})
    async with AsyncSignoffClient(proxy.url, API_TOKEN) as client:
        approvals = Approvals(tmp_path / "runs", client=client, channel="C1", approvers=["U1"])
        agent, _, request_id = await started(approvals, [[email()], done()], "forged-1")
        await papp.click(request_id, "U1", user_name="alice")
        await decided(papp, request_id)
        proxy.tamper = when_decided(altered)  # the recipient rewritten, its hash made to match
        with pytest.raises(SignatureInvalid, match="does not match"):
            await approvals.resume(agent, "forged-1")
        assert calls() == [] and proxy.tampered > 0
        paused = approvals.paused("forged-1")
        assert paused is not None and paused.status == "paused"
        assert await client.get_resume(paused.key) is None  # not even claimed
        proxy.tamper = None  # the genuine decision, read again: it runs, once
        assert await approvals.resume(agent, "forged-1") is not None
    assert calls() == [{"tool": "send_email", "args": {"to": "c@example.com", "subject": "Your refund"}}]


async def test_a_tool_gated_as_it_is_reports_the_output_the_sdk_recorded(papp: App, approvals: Approvals) -> None:
    """A `FunctionTool` of the application's own, gated with `approvals.gate`: its receipt is the call's output."""
    from agents import function_tool

    @function_tool
    def close_ticket(ticket: str) -> str:
        """Close a support ticket."""
        return f"closed {ticket}"

    agent = Agent(name="desk", tools=[approvals.gate(close_ticket)], model=ScriptedModel(
        [[function_call("close_ticket", {"ticket": "T-9"}, call_id="call_close")], done("Closed.")]))
    paused = await approvals.pause(await Runner.run(agent, "Close it"), "gated-1")
    assert paused is not None
    [request_id] = paused.request_ids
    await papp.click(request_id, "U1", user_name="alice")
    await decided(papp, request_id)
    assert await approvals.resume(agent, "gated-1") is not None
    body = await receipt(papp, request_id)
    assert body["outcome_status"] == "ran" and body["outcome"]["result"] == "closed T-9"
    assert body["outcome"]["params"] == {"ticket": "T-9"}
