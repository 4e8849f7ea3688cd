"""Signoff's own runner under a tier with an undo window (docs/policy.md): an Approve resumes the run
only when the window ends; an Undo inside it leaves the run waiting and the email unsent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from bot.sandbox import SlackEmulator
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from tests.fakes.clock import FakeClock
from tests.support.app import start_app
from tests.approvals.undo_steps import POLICY
from tests.support.waits import until

async def audited(agent: AgentApp, request_id: str, kind: str, count: int = 1) -> None:
    """Until the request's audit has `count` rows of `kind` (an observable state, not a sleep)."""
    store = agent.app.signoff.store  # type: ignore[union-attr]
    async def written() -> bool:
        return [e.type for e in await store.audit_events(request_id)].count(kind) >= count

    await until(written, f"{count} {kind} audit row(s) of {request_id}")


EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Your refund is on its way."}


@pytest_asyncio.fixture
async def uagent(db_url: str, slack: SlackEmulator, model: FakeAnthropic,
                 tmp_path: Path) -> AsyncIterator[tuple[AgentApp, FakeClock]]:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    clock = FakeClock()
    running = await start_app(db_url, slack, clock=clock, **agent_env(model, tmp_path, SIGNOFF_POLICY=str(path),
                                                                      SIGNOFF_SWEEP_SECONDS="3600"))
    try:
        yield AgentApp(running, model, tmp_path), clock
    finally:
        await running.stop()


async def test_the_runner_resumes_when_the_window_ends_and_not_after_an_undo(
        uagent: tuple[AgentApp, FakeClock]) -> None:
    agent, clock = uagent
    agent.model.script(
        message(text("I'll email the customer."), tool_use("send_email", EMAIL, id="toolu_email")),
        message(text("The email went out.")),
    )
    run = await agent.start("Tell the customer their refund is on its way")
    [call] = await agent.waiting_calls(run["id"], timeout=60)
    request_id = call["request_id"]
    sweep = agent.app.signoff.timers.sweep  # type: ignore[union-attr]

    await agent.app.click(request_id, "U1", user_name="alice")
    await audited(agent, request_id, "approval_held")  # "runs in 30 s · Undo"
    card = await agent.app.card(request_id)
    await agent.app.slack_client.block_action(user="U1", action_id="signoff_undo", value=request_id,
                                              block_id="held", channel=card.channel, message_ts=card.ts)
    await audited(agent, request_id, "undone")
    clock.advance(minutes=2)
    await sweep()
    [still] = await agent.waiting_calls(run["id"])  # undone: the run still waits, nothing was sent
    assert still["request_id"] == request_id and agent.emails() == []

    await agent.app.click(request_id, "U1", user_name="alice")  # approved again, and left alone
    await audited(agent, request_id, "approval_held", 2)
    clock.advance(seconds=29)
    await sweep()
    await agent.waiting_calls(run["id"])
    assert agent.emails() == []
    clock.advance(seconds=1)
    await sweep()
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    assert len(agent.emails()) == 1
