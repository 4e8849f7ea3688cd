"""The LangGraph resumer after the click (issue 37): LangChain HumanInTheLoopMiddleware tool calls a person
approved report what they did (from their ToolMessages) to the API and the card, rejected ones report
nothing; and a decision altered on the way is refused: the thread stays paused and nothing runs.

Real langgraph / langchain (`create_agent`), a real SqliteSaver, the running Signoff, signed Slack clicks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

import signoff.signatures as sig
from bot.sandbox.signed import plain_input
from signoff import SignoffClient
from signoff.langgraph import post_cards
from signoff.langgraph_resume import Resumer
from tests.api.test_signed_decisions import public_key, when_decided
from tests.approvals.batch_steps import approve_selected, item_state, open_item, submit
from tests.client.helpers import card_text, receipt
from tests.client.lg_graphs import calls, hitl_agent, saver
from tests.client.test_langgraph import CARD, ITEM_EDIT, ITEM_REJECT, client, decided, lg_env, thread
from tests.fakes.tamper_proxy import TamperProxy
from tests.support.app import API_TOKEN, App

__all__ = ["client", "lg_env"]  # fixtures, used by name


async def paused_batch(tmp_path: Path, name: str, signoff: SignoffClient) -> tuple[str, str]:
    """The two-tool agent run to its interrupt, its card posted: (checkpoint file, batch request id)."""
    db = str(tmp_path / "checkpoints.db")
    agent = hitl_agent(saver(db))
    await asyncio.to_thread(agent.invoke, {"messages": [{"role": "user", "content": "tidy up"}]}, thread(name))
    [batch_id] = await asyncio.to_thread(post_cards, agent, thread(name), client=signoff, **CARD)
    return db, batch_id


async def test_approved_tool_calls_report_what_ran_and_a_rejected_one_reports_nothing(
        app: App, lg_env: dict[str, str], tmp_path: Path, client: SignoffClient) -> None:
    db, batch_id = await paused_batch(tmp_path, "receipts-1", client)
    view = await open_item(app, batch_id, 0, ITEM_EDIT)
    await submit(app, view, {"p:to": {"value": plain_input("b@example.com")}, "p:subject": {"value": plain_input("Hi")}})
    await item_state(app, batch_id, 0)
    view = await open_item(app, batch_id, 1, ITEM_REJECT)
    await submit(app, view, {"reason": {"value": plain_input("Keep the report")}})
    await decided(app, batch_id)
    resumer = Resumer(hitl_agent, saver(db), client=client, **CARD)
    assert await asyncio.to_thread(resumer.resume_ready) == ["receipts-1"]
    assert calls() == [{"tool": "send_email", "args": {"to": "b@example.com", "subject": "Hi"}}]
    body = await receipt(app, batch_id)
    mail_key, rm_key = (i["key"] for i in body["decision"]["items"])
    ran = body["outcome"]["items"][mail_key]
    assert ran["status"] == "ran" and ran["params"] == {"to": "b@example.com", "subject": "Hi"} and ran["same_params"]
    assert ran["result"] == "sent to b@example.com: Hi" and rm_key not in body["outcome"]["items"]
    assert body["outcome_status"] == "reported"
    assert "Approved by alice, then ran" in await card_text(app, batch_id)


@pytest_asyncio.fixture
async def proxy(app: App) -> AsyncIterator[TamperProxy]:
    running = await TamperProxy(app.url).start()
    try:
        yield running
    finally:
        await running.stop()


async def test_a_decision_signed_for_another_request_leaves_the_thread_paused(
        app: App, lg_env: dict[str, str], tmp_path: Path, client: SignoffClient, proxy: TamperProxy) -> None:
    sig.reset({"SIGNOFF_PUBLIC_KEY": await public_key(app)})
    earlier = await app.submit()
    await app.click(earlier["id"], "U1", user_name="alice")
    other = await decided(app, earlier["id"])
    db, batch_id = await paused_batch(tmp_path, "forged-1", client)
    await approve_selected(app, batch_id, [0, 1])
    await decided(app, batch_id)
    proxy.tamper = when_decided(lambda body: {**body, "signature": other["signature"]})
    with SignoffClient(proxy.url, API_TOKEN) as tampered:
        resumer = Resumer(hitl_agent, saver(db), client=tampered, **CARD)
        assert await asyncio.to_thread(resumer.resume_ready) == []  # refused: not resumed
    assert calls() == [] and proxy.tampered > 0
    assert hitl_agent(saver(db)).get_state(thread("forged-1")).next  # still paused at its interrupt
    genuine = Resumer(hitl_agent, saver(db), client=client, **CARD)
    assert await asyncio.to_thread(genuine.resume_ready) == ["forged-1"]
    assert len(calls()) == 2
