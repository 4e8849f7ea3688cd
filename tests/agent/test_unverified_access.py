"""Questions and runs whose permissions rest on a user group Slack cannot list just now: the person is
told their input was not recorded and why, nothing is written, and it works once Slack answers
(the approvals' side: tests/slack/test_unverified_access.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.domain.model import Status
from bot.sandbox import SlackEmulator
from bot.sandbox.model import FakeAnthropic, message, tool_use
from bot.slack.directory import SlackDirectory
from tests.support.outbox import drain
from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from tests.agent.test_questions import ONE, answer_by, question_to_sops
from tests.support.app import start_app

from tests.slack.test_unverified_access import UNKNOWN, slack_answers_again

LOOKUP = "usergroups.users.list"
EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Hello"}


@pytest_asyncio.fixture
async def grouped(db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path) -> AsyncIterator[AgentApp]:
    """Runs may be started, written into and cancelled by the members of SOPS (U1, U3); every check asks Slack."""
    slack.add_usergroup("SOPS", ["U1", "U3"])
    running = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_RUN_STARTERS="SOPS",
                                                         SIGNOFF_RUN_APPROVERS="U2", SIGNOFF_RUN_WRITERS="SOPS"))
    assert running.signoff is not None
    directory = running.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    directory.ttl = 0
    try:
        yield AgentApp(running, model, tmp_path)
    finally:
        await running.stop()


async def note_to(agent: AgentApp, user: str, count: int = 1) -> str:
    notes = [n for n in await agent.slack.wait_for("chat.postEphemeral", count=count) if n.args["user"] == user]
    return str(notes[-1].args["text"])


@pytest.mark.parametrize("how", ["button", "thread"])
async def test_an_answer_that_cannot_be_checked_is_told_and_writes_nothing(grouped: AgentApp, how: str) -> None:
    app = grouped.app
    assert app.signoff is not None
    question_id, card, before = await question_to_sops(grouped)
    grouped.slack.error(LOOKUP, "fatal_error", times=5)
    await answer_by(grouped, how, question_id, card)()
    note = await note_to(grouped, "U1")
    assert UNKNOWN in note and "your answer was not recorded" in note
    await drain(app)
    assert await app.signoff.store.get_request(question_id) == before
    assert before.status is Status.PENDING

    slack_answers_again(app)
    await answer_by(grouped, "thread", question_id, card)()
    _, answered = await app.api("GET", f"/api/v1/questions/{question_id}?wait=10")
    assert answered["status"] == "answered"


async def test_starting_a_run_that_cannot_be_checked_is_told_and_starts_nothing(grouped: AgentApp) -> None:
    grouped.slack.error(LOOKUP, "fatal_error", times=1)
    response = await grouped.app.slack_client.command(user="U1", text="run tidy up", channel="C1")
    assert response.status == 200 and UNKNOWN in response.json()["text"]
    assert "your command was not recorded" in response.json()["text"]
    await drain(grouped.app)
    assert not grouped.slack.calls_to("chat.postMessage") and grouped.model.requests == []


async def test_writing_into_or_cancelling_a_run_that_cannot_be_checked_is_told_and_changes_nothing(
        grouped: AgentApp) -> None:
    agent = grouped
    agent.model.script(message(tool_use("send_email", EMAIL, id="toolu_email")))
    response = await agent.app.slack_client.command(user="U1", user_name="alice", text="run email the customer",
                                                     channel="C1")
    assert "Starting an agent run" in response.json()["text"]
    [posted] = await agent.slack.wait_for("chat.postMessage")
    run_id = str(posted.args["metadata"]["event_payload"]["run_id"])
    await agent.waiting_calls(run_id)
    root = await agent.root(run_id)

    # U3 (not the starter, who is listed by name) may write and cancel as a member of SOPS.
    agent.slack.error(LOOKUP, "fatal_error", times=1)
    await agent.thread_reply(root, "U3", "use the formal greeting")
    note = await note_to(agent, "U3")
    assert UNKNOWN in note and "your message was not recorded" in note

    agent.slack.error(LOOKUP, "fatal_error", times=1)
    [cancel] = [e for b in root.blocks if b["type"] == "actions" for e in b["elements"]]
    await agent.app.slack_client.block_action(user="U3", action_id=cancel["action_id"], value=cancel["value"],
                                              block_id="run", channel=root.channel, message_ts=root.ts)
    note = await note_to(agent, "U3", count=2)
    assert UNKNOWN in note and "your click was not recorded" in note
    await drain(agent.app)
    run = await agent.run(run_id)
    assert run["status"] == "waiting" and not run.get("cancel_requested"), run
    assert agent.app.signoff is not None and agent.app.signoff.agent is not None
    assert [e.type for e in await agent.app.signoff.store.audit_events(run_id)].count("intervention") == 0

    slack_answers_again(agent.app)
    await agent.thread_reply(root, "U3", "use the formal greeting")  # Slack answers now
    [*_, noted] = await agent.slack.wait_for("chat.postEphemeral", count=3)
    assert noted.args["user"] == "U3" and noted.args["text"].startswith("Noted")


async def test_a_run_command_whose_lookup_does_not_answer_is_acked_with_a_note(
        grouped: AgentApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """/signoff run is checked before its ack: a lookup that does not answer in time is one Slack could
    not give, said in the ack (not a "dispatch_failed" from Slack once its 3 s ran out)."""
    import bot.agent.slack as agent_slack
    monkeypatch.setattr(agent_slack, "PRE_ACK_LOOKUP_SECONDS", 0.2)
    grouped.slack.hang(LOOKUP)
    response = await grouped.app.slack_client.command(user="U1", text="run tidy up", channel="C1")
    assert response.status == 200 and UNKNOWN in response.json()["text"]
    grouped.slack.release_hung()
    await drain(grouped.app)
    assert not grouped.slack.calls_to("chat.postMessage") and grouped.model.requests == []


async def test_checking_who_may_write_into_a_run_holds_no_database_write(grouped: AgentApp) -> None:
    """A thread message into a run asks Slack about SOPS before its unit opens: while Slack is slow,
    other writes (here an agent's question) go through (on SQLite a unit holds the one writer)."""
    agent = grouped
    agent.model.script(message(tool_use("send_email", EMAIL, id="toolu_email")))
    response = await agent.app.slack_client.command(user="U1", text="run email the customer", channel="C1")
    assert "Starting an agent run" in response.json()["text"]
    [posted] = await agent.slack.wait_for("chat.postMessage")
    run_id = str(posted.args["metadata"]["event_payload"]["run_id"])
    await agent.waiting_calls(run_id)
    root = await agent.root(run_id)
    seen = len(agent.slack.calls_to(LOOKUP, ok_only=False))
    assert agent.app.signoff is not None
    directory = agent.app.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    directory._groups.clear()  # a lookup of SOPS is due (the run's start cached it)
    agent.slack.hang(LOOKUP, apply=True)
    writing = asyncio.create_task(agent.thread_reply(root, "U3", "use the formal greeting"))
    await agent.slack.wait_for(LOOKUP, count=seen + 1, ok_only=False)
    status, _ = await asyncio.wait_for(agent.app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1"}), 10)
    assert status == 201
    agent.slack.release_hung()
    await writing
    [*_, noted] = await agent.slack.wait_for("chat.postEphemeral")
    assert noted.args["user"] == "U3" and noted.args["text"].startswith("Noted")


async def test_a_thread_answer_is_taken_when_the_name_lookup_drops(grouped: AgentApp) -> None:
    app = grouped.app
    status, body = await app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1"})
    assert status == 201
    card = await app.card(body["id"])
    grouped.slack.drop("users.info", times=5)  # the connection drops, on every retry
    msg = grouped.slack.add_message("C1", "U2", "staging", thread_ts=card.ts)
    await app.slack_client.event({"type": "message", "channel": "C1", "user": "U2", "text": msg.text,
                                  "ts": msg.ts, "thread_ts": card.ts, "channel_type": "channel"})
    _, answered = await app.api("GET", f"/api/v1/questions/{body['id']}?wait=10")
    assert answered["status"] == "answered" and answered["decision"]["decided_by"] == {"id": "U2", "name": None}


async def test_a_command_whose_check_outlasts_slacks_deadline_does_nothing_afterwards(
        grouped: AgentApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before the ack took longer than Signoff gives itself to answer Slack: Slack got a
    500 and showed the person an error. When the check then lets them through, the run is not started
    behind their back: they are told it was not recorded, and nothing runs."""
    import bot.agent.slack as agent_slack
    import bot.process.slack_endpoint as web
    monkeypatch.setattr(agent_slack, "PRE_ACK_LOOKUP_SECONDS", 30.0)
    monkeypatch.setattr(web, "ACK_WITHIN_SECONDS", 0.2)
    grouped.slack.hang(LOOKUP, apply=True)
    response = await grouped.app.slack_client.command(user="U1", text="run tidy up", channel="C1")
    assert response.status == 500  # what Slack got at the deadline: it shows the person an error
    grouped.slack.release_hung()  # Slack answers the lookup now: U1 is in SOPS
    note = await note_to(grouped, "U1")
    assert "took too long to answer Slack" in note and "stopped before acting on your command" in note
    await drain(grouped.app)
    assert not grouped.slack.calls_to("chat.postMessage") and grouped.model.requests == []
