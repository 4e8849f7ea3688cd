"""Taking over a failed run from Slack (issue 38): its thread shows what it did and why it stopped, its
message offers Retry, Correct and retry and Cancel, and a retry goes on from the failed step: the
steps before are kept and their tool calls never run again."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from bot.sandbox import Message, SlackEmulator
from bot.sandbox.model import FakeAnthropic, error, message, text, tool_use
from bot.sandbox.signed import plain_input
from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from tests.agent.test_run_permissions import ephemeral_to, slack_run
from tests.support.app import start_app

EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Hello,\nyour refund is on its way."}
BROKEN = error(400, "invalid_request_error", "messages: the conversation is too long for this model")


@pytest_asyncio.fixture
async def runs(db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path) -> AsyncIterator[AgentApp]:
    """Runs started in Slack by U1 (who alone may write into them: nobody else is named)."""
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text("Refund the customer: order A-1042.\n")
    running = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_RUN_STARTERS="U1",
                                                         SIGNOFF_RUN_MAX_STEPS="10"))
    try:
        yield AgentApp(running, model, tmp_path)
    finally:
        await running.stop()


def buttons(root: Message) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in root.blocks if b["type"] == "actions" for e in b["elements"]}


async def root_now(agent: AgentApp, run_id: str, cond: Any) -> Message:
    """The run's message once Slack shows it in the state `cond` accepts (the outbox updates it)."""
    root = await agent.root(run_id)
    for _ in range(500):
        current = agent.slack.messages[(root.channel, root.ts)]
        if cond(current):
            return current
        await asyncio.sleep(0.01)  # test-side: waiting for the outbox's chat.update
    raise AssertionError(f"the run's message never got there: {agent.slack.messages[(root.channel, root.ts)].blocks}")


async def click(agent: AgentApp, root: Message, user: str, action_id: str) -> Any:
    [(block_id, button)] = [(b["block_id"], e) for b in root.blocks if b["type"] == "actions"
                            for e in b["elements"] if e["action_id"] == action_id]
    return await agent.app.slack_client.block_action(
        user=user, user_name=user.lower(), action_id=action_id, value=button["value"], block_id=block_id,
        channel=root.channel, message_ts=root.ts)


async def failed_note(agent: AgentApp, root: Message, count: int = 1) -> Message:
    for _ in range(500):
        notes = [m for m in agent.thread(root) if "The run failed" in m.text]
        if len(notes) >= count:
            return notes[count - 1]
        await asyncio.sleep(0.01)  # test-side: waiting for the outbox's note
    raise AssertionError("no failure note in the run's thread")


def seven_steps() -> list[Any]:
    """Steps 1-7 of a scripted run: reads, an email a person approves at step 3, more reads."""
    return [
        message(text("Looking around."), tool_use("list_files", {}, id="toolu_1")),
        message(tool_use("read_file", {"path": "notes.txt"}, id="toolu_2")),
        message(text("Emailing the customer."), tool_use("send_email", EMAIL, id="toolu_3")),
        message(tool_use("list_files", {}, id="toolu_4")),
        message(tool_use("read_file", {"path": "notes.txt"}, id="toolu_5")),
        message(tool_use("list_files", {}, id="toolu_6")),
        message(tool_use("read_file", {"path": "notes.txt"}, id="toolu_7")),
    ]


async def test_a_run_that_fails_at_step_8_is_corrected_in_slack_and_finishes_without_redoing_steps_1_to_7(
        runs: AgentApp) -> None:
    agent = runs
    agent.model.script(*seven_steps(), BROKEN, message(text("Refund email sent; nothing else to do.")))
    run_id = await slack_run(agent, "U1", "refund order A-1042")
    [call] = await agent.waiting_calls(run_id)
    await agent.app.click(call["request_id"], "U2", user_name="bob")  # not the starter: duties hold
    failed = await agent.wait_status(run_id, "failed", "completed")
    assert failed["status"] == "failed" and failed["step_count"] == 7, failed
    assert "400" in failed["error"] and "too long" in failed["error"]
    assert len(agent.model.requests) == 8 and len(agent.emails()) == 1

    # The thread shows why and what it did; the run's message offers the take-over.
    root = await root_now(agent, run_id, lambda m: blocks_have(m, "signoff_run_retry"))
    assert set(buttons(root)) == {"signoff_run_retry", "signoff_run_correct", "signoff_run_close"}
    note = json.dumps((await failed_note(agent, root)).blocks, ensure_ascii=False)
    assert "failed after 7 steps" in note and "too long" in note
    assert "step 3 · send_email · ran" in note and "step 7 · read_file · ran" in note

    # Someone who may not write into the run cannot take it over.
    await click(agent, root, "UOUT", "signoff_run_retry")
    [refused] = await ephemeral_to(agent, "UOUT", 1)
    assert "may not take this run over" in refused
    assert (await agent.run(run_id))["status"] == "failed"

    # The starter corrects it: a form, then the run goes on with their message first.
    await click(agent, root, "U1", "signoff_run_correct")
    [opened] = await agent.slack.wait_for("views.open")
    view = opened.args["view"]
    empty = await agent.app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id=view["callback_id"], private_metadata=view["private_metadata"],
        values={"correction": {"text": plain_input("   ")}})
    assert "errors" in empty.json() and (await agent.run(run_id))["status"] == "failed"  # nothing taken
    response = await agent.app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id=view["callback_id"], private_metadata=view["private_metadata"],
        values={"correction": {"text": plain_input("Keep the reply short: just confirm the email went out.")}})
    assert response.status == 200
    done = await agent.wait(run_id, lambda r: r["retries"] == 1 and r["status"] in ("completed", "failed"))
    assert done["status"] == "completed", done
    assert done["result"] == "Refund email sent; nothing else to do." and done["retries"] == 1

    # Step 8 again, on the same history plus the correction: steps 1-7 were not redone.
    assert len(agent.model.requests) == 9
    before, after = agent.model.requests[7]["messages"], agent.model.requests[8]["messages"]
    # The same messages; the correction joins the last user turn (after step 7's tool result).
    assert len(after) == len(before) and after[:-1] == before[:-1]
    kept = before[-1]["content"]
    assert after[-1]["content"][:len(kept)] == kept
    [added] = after[-1]["content"][len(kept):]
    assert "Keep the reply short" in added["text"] and "alice" in added["text"]
    assert len(agent.emails()) == 1  # the approved email ran once
    assert [c["attempts"] for c in done["tool_calls"]] == [1] * 7
    root = await root_now(agent, run_id, lambda m: not blocks_have(m, "signoff_run_retry"))
    assert "signoff_run_retry" not in buttons(root)


def blocks_have(message: Message, action_id: str) -> bool:
    return action_id in buttons(message)


async def test_retry_after_the_step_limit_gives_the_run_as_many_steps_again(
        db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    running = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_RUN_MAX_STEPS="3"))
    agent = AgentApp(running, model, tmp_path)
    try:
        model.script(*[message(tool_use("list_files", {}, id=f"toolu_{i}")) for i in range(1, 5)],
                     message(text("Found nothing to tidy.")))
        run_id = await slack_run(agent, "U1", "tidy the workspace")
        failed = await agent.wait_status(run_id, "failed", "completed")
        assert failed["status"] == "failed" and failed["step_count"] == 3 and "step limit" in failed["error"]
        root = await root_now(agent, run_id, lambda m: blocks_have(m, "signoff_run_retry"))
        await click(agent, root, "U1", "signoff_run_retry")
        done = await agent.wait(run_id, lambda r: r["retries"] == 1 and r["status"] in ("completed", "failed"))
        assert done["status"] == "completed" and done["step_count"] == 5 and done["step_limit"] == 6, done
        assert [c["attempts"] for c in done["tool_calls"]] == [1] * 4
    finally:
        await running.stop()


async def test_two_retries_at_once_take_the_run_over_once_and_cancel_gives_it_up(runs: AgentApp) -> None:
    agent = runs
    agent.model.script(message(tool_use("list_files", {}, id="toolu_1")), BROKEN, BROKEN)
    run_id = await slack_run(agent, "U1", "look around")
    assert (await agent.wait_status(run_id, "failed", "completed"))["status"] == "failed"
    root = await root_now(agent, run_id, lambda m: blocks_have(m, "signoff_run_retry"))
    first = copy.deepcopy(root)  # the buttons shown for the first failure
    await asyncio.gather(click(agent, root, "U1", "signoff_run_retry"), click(agent, root, "U1", "signoff_run_retry"))
    failed = await agent.wait(run_id, lambda r: r["status"] == "failed" and r["retries"] >= 1)
    await failed_note(agent, root, count=2)  # it failed again: a second note with that failure
    told = len(agent.slack.calls_to("chat.postEphemeral"))
    await click(agent, first, "U1", "signoff_run_retry")  # the first failure's Retry, clicked late
    notes = await ephemeral_to(agent, "U1", told + 1)
    assert "took this run over already" in notes[-1]
    failed = await agent.run(run_id)
    assert failed["retries"] == 1 and len(agent.model.requests) == 3  # one retry: one more model call

    stale = copy.deepcopy(await root_now(agent, run_id, lambda m: blocks_have(m, "signoff_run_close")))
    await click(agent, stale, "U1", "signoff_run_close")
    closed = await agent.wait_status(run_id, "cancelled")
    assert closed["retries"] == 1
    await root_now(agent, run_id, lambda m: not buttons(m))  # nothing left to click
    told = len(agent.slack.calls_to("chat.postEphemeral"))
    await click(agent, stale, "U1", "signoff_run_retry")  # a Retry left on an old copy of the message
    notes = await ephemeral_to(agent, "U1", told + 1)
    assert "cancelled already" in notes[-1]
    assert (await agent.run(run_id))["status"] == "cancelled" and len(agent.model.requests) == 3
