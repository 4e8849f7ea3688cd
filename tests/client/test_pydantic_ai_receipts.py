"""Pydantic AI after the click (issues 36 and 37): the card's Edit form is the tool's own JSON schema (a
typed edit reaches the tool typed), "Reply instead" reaches the model as the call's answer, each approved
call reports what it did (inline and when resumed), and a decision altered on the way is refused with
nothing run.

Real pydantic-ai with its offline `FunctionModel`, the running Signoff, signed Slack clicks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from pydantic_ai import Agent
from pydantic_ai.tools import DeferredToolRequests

import signoff.signatures as sig
from bot.sandbox.signed import number_input, plain_input
from signoff import AsyncSignoffClient, SignatureInvalid
from signoff.pydantic_ai import SignoffApprovals
from tests.api.test_signed_decisions import altered, public_key, when_decided
from tests.approvals.batch_steps import approve_selected
from tests.client.helpers import card_text, pending_id, receipt
from tests.client.pai_agents import CARD, build, calls, record, scripted
from tests.client.test_langgraph import decided, submit_modal
from tests.client.test_pydantic_ai import aclient, inline, pai_env
from tests.fakes.tamper_proxy import TamperProxy
from tests.support.app import API_TOKEN, App

__all__ = ["aclient", "pai_env"]  # fixtures, used by name

REFUND = [("refund", {"order": "A-1042", "amount": 40})]


def refunds(approvals: SignoffApprovals, *, fail: bool = False, handled: bool = True) -> Agent[None, Any]:
    """An agent with one typed tool (an integer amount) that needs approval (`handled`: with Signoff's
    capability; without it the run ends on the deferred call and `pause` posts the card)."""
    agent: Agent[None, Any] = Agent(scripted(REFUND), output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
                                    capabilities=[approvals.capability()] if handled else [])

    @agent.tool_plain(requires_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund part of an order."""
        record("refund", {"order": order, "amount": amount})
        if fail:
            raise RuntimeError("the payment provider is down")
        return f"refunded {amount!r} on {order}"

    return agent


async def test_the_card_is_typed_by_the_tools_schema_and_a_typed_edit_reaches_the_tool(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    running = asyncio.create_task(refunds(inline(aclient)).run("Refund A-1042"))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    schema = body["action"]["params_schema"]
    assert schema["properties"]["amount"]["type"] == "integer" and schema["properties"]["order"]["type"] == "string"
    assert sorted(schema["required"]) == ["amount", "order"]
    assert body["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    await submit_modal(app, request_id, "signoff_edit", {"p:order": {"value": plain_input("A-1042")},
                                                         "p:amount": {"value": number_input("35")}})
    result = await asyncio.wait_for(running, 30)
    assert calls() == [{"tool": "refund", "args": {"order": "A-1042", "amount": 35}}]  # an int, as the tool takes
    assert result.output == "refund[success]: refunded 35 on A-1042"
    done = await receipt(app, request_id)
    assert done["outcome_status"] == "ran" and done["outcome"]["params"] == {"order": "A-1042", "amount": 35}
    assert done["outcome"]["same_params"] and done["outcome"]["result"] == "refunded 35 on A-1042"
    assert "with the approved parameters" in await card_text(app, request_id)


async def test_a_run_without_the_capability_gets_the_typed_form_from_the_agent_and_still_reports(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    approvals = SignoffApprovals(client=aclient, **CARD)
    agent = refunds(approvals, handled=False)
    paused = await approvals.pause(await agent.run("Refund A-1042"), agent)
    _, body = await app.api("GET", f"/api/v1/approvals/{paused.request_id}")
    assert body["action"]["params_schema"]["properties"]["amount"]["type"] == "integer"
    await app.click(paused.request_id, "U1", user_name="alice")
    await decided(app, paused.request_id)
    result = await approvals.resume(agent, paused)  # resume adds the receipts itself
    assert result is not None and result.output == "refund[success]: refunded 40 on A-1042"
    assert (await receipt(app, paused.request_id))["outcome_status"] == "ran"


async def test_reply_instead_is_the_models_answer_and_the_tool_does_not_run(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    running = asyncio.create_task(build(inline(aclient)).run("Send the refund email"))
    request_id = await pending_id(app)
    await submit_modal(app, request_id, "signoff_respond", {"reason": {"value": plain_input("I called them myself.")}})
    result = await asyncio.wait_for(running, 30)
    assert calls() == []
    assert result.output == "send_email[denied]: I called them myself."
    assert (await receipt(app, request_id))["outcome_status"] is None  # nothing approved, nothing to report


async def test_a_resumed_run_reports_what_ran_and_a_failing_tool_reports_failed(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    approvals = SignoffApprovals(client=aclient, **CARD)  # wait=0: the run ends, a later resume goes on
    result = await refunds(approvals, fail=True).run("Refund A-1042")
    paused = await approvals.pause(result)
    await app.click(paused.request_id, "U1", user_name="alice")
    await decided(app, paused.request_id)
    later = SignoffApprovals(client=aclient, **CARD)  # another process's: only the JSON crosses over
    with pytest.raises(RuntimeError, match="payment provider is down"):
        await later.resume(refunds(later, fail=True), type(paused).from_json(paused.to_json()))
    body = await receipt(app, paused.request_id)
    assert body["outcome_status"] == "failed" and "RuntimeError: the payment provider is down" in body["outcome"]["error"]
    assert "failed when run" in await card_text(app, paused.request_id)


async def test_a_batch_reports_each_approved_call_under_its_item(
        app: App, pai_env: dict[str, str], aclient: AsyncSignoffClient) -> None:
    two = [("send_email", {"to": "a@example.com", "subject": "Hi"}), ("read_file", {"path": "/tmp/r.txt"})]
    approvals = SignoffApprovals(client=aclient, **CARD)
    agent = build(approvals, two)
    paused = await approvals.pause(await agent.run("Tidy up"))
    _, asked = await app.api("GET", f"/api/v1/approvals/{paused.request_id}")
    assert [i["allowed_decisions"] for i in asked["items"]] == [["approve", "edit", "reject", "respond"]] * 2
    assert asked["items"][0]["action"]["params_schema"]["properties"]["subject"]["type"] == "string"
    await approve_selected(app, paused.request_id, [0, 1])
    await decided(app, paused.request_id)
    assert await approvals.resume(agent, paused) is not None
    body = await receipt(app, paused.request_id)
    assert sorted(o["status"] for o in body["outcome"]["items"].values()) == ["ran", "ran"]
    assert body["outcome_status"] == "reported"


@pytest_asyncio.fixture
async def proxy(app: App) -> AsyncIterator[TamperProxy]:
    running = await TamperProxy(app.url).start()
    try:
        yield running
    finally:
        await running.stop()


async def test_an_altered_decision_is_refused_and_nothing_runs(app: App, pai_env: dict[str, str],
                                                                proxy: TamperProxy) -> None:
    sig.reset({"SIGNOFF_PUBLIC_KEY": await public_key(app)})
    async with AsyncSignoffClient(proxy.url, API_TOKEN) as client:
        approvals = SignoffApprovals(client=client, **CARD)
        agent = build(approvals)
        paused = await approvals.pause(await agent.run("Send the refund email"))
        await app.click(paused.request_id, "U1", user_name="alice")
        await decided(app, paused.request_id)
        proxy.tamper = when_decided(altered)  # another recipient, the params hash made to match
        with pytest.raises(SignatureInvalid, match="does not match"):
            await approvals.resume(agent, paused)
        assert calls() == [] and proxy.tampered > 0
        assert await client.get_resume(paused.claim_key) is None  # not even claimed
        proxy.tamper = None
        assert await approvals.resume(agent, paused) is not None  # the genuine decision: it runs, once
    assert calls() == [{"tool": "send_email", "args": {"to": "customer@example.com", "subject": "Your refund"}}]
