"""Clarifying questions: ask_human in a run's thread, and the same questions for external agents."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest

from bot.domain.model import Request, Status
from bot.slack.directory import SlackDirectory
from tests.support.outbox import drain
from tests.agent.helpers import AgentApp
from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import checkboxes, radio
from tests.slack.test_checked_decisions import written_during_the_check

from tests.support.waits import long_poll_registered

ONE = {"questions": [{"question": "Which environment?", "header": "Env", "options": [
    {"label": "staging"}, {"label": "production", "description": "live customers"}]}]}
TWO = {"questions": [
    {"question": "Which environment?", "options": [{"label": "staging"}, {"label": "production"}]},
    {"question": "Who should hear about it?", "multi_select": True,
     "options": [{"label": "support"}, {"label": "sales"}, {"label": "nobody"}]},
]}


def answer_by(agent: AgentApp, how: str, question_id: str, card: Any, user: str = "U1",
              text: str = "production") -> Callable[[], Awaitable[Any]]:
    """Sends `user`'s answer to a question's card: its first button ("button") or a thread reply."""
    app = agent.app
    if how == "button":
        buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
        return partial(app.slack_client.block_action, user=user, action_id=buttons[0]["action_id"],
                       value=question_id, block_id="signoff_q0", channel="C1", message_ts=card.ts)
    msg = agent.slack.add_message("C1", user, text, thread_ts=card.ts)
    return partial(app.slack_client.event, {"type": "message", "channel": "C1", "user": user, "text": msg.text,
                                            "ts": msg.ts, "thread_ts": card.ts, "channel_type": "channel"})


async def question_to_sops(agent: AgentApp) -> tuple[str, Any, Request]:
    """An agent's question over the API for the members of user group SOPS, in C1, once its card is
    out and the outbox is quiet: (its id, its card, the stored request as it is then)."""
    app = agent.app
    assert app.signoff is not None
    status, body = await app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1", "approvers": ["SOPS"]})
    assert status == 201
    card = await app.card(body["id"])
    await drain(app)
    before = await app.signoff.store.get_request(body["id"])
    assert before is not None
    return body["id"], card, before


def last_result(agent: AgentApp, index: int) -> dict:
    return agent.model.requests[index]["messages"][-1]["content"][0]


async def test_ask_human_answered_with_a_button(agent: AgentApp) -> None:
    agent.model.script(
        message(text("I need to know where."), tool_use("ask_human", ONE, id="toolu_ask")),
        message(text("Deploying to staging.")),
    )
    run = await agent.start("Deploy the new build")
    [call] = await agent.waiting_calls(run["id"])
    assert call["gate"] == "question" and call["request_id"].startswith("qst_")
    root = await agent.root(run["id"])
    card = await agent.app.card(call["request_id"])
    assert card.thread_ts == root.ts
    buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    assert [b["text"]["text"] for b in buttons] == ["staging", "production"]
    assert "live customers" in json.dumps(card.blocks)

    response = await agent.app.slack_client.block_action(
        user="U1", user_name="alice", action_id=buttons[0]["action_id"], value=call["request_id"],
        block_id="signoff_q0", channel=card.channel, message_ts=card.ts,
    )
    assert response.status == 200
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    result = last_result(agent, 1)
    assert result["tool_use_id"] == "toolu_ask" and not result.get("is_error")
    assert "alice" in result["content"] and "Which environment? -> staging" in result["content"]
    # The card shows the answer and who gave it; its buttons are gone.
    await agent.app.signoff.dispatcher.drain()  # type: ignore[union-attr]
    answered = agent.slack.messages[(card.channel, card.ts)]
    assert not any(b["type"] == "actions" for b in answered.blocks)
    assert "staging" in json.dumps(answered.blocks) and "<@U1>" in json.dumps(answered.blocks)
    assert agent.model.rejections == []


async def test_ask_human_answered_by_a_thread_reply_once_despite_event_retries(agent: AgentApp) -> None:
    agent.model.script(
        message(tool_use("ask_human", TWO, id="toolu_ask")),
        message(text("OK.")),
    )
    run = await agent.start("Deploy and tell people")
    [call] = await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    await agent.app.card(call["request_id"])
    reply = "staging, and only tell support"
    msg = agent.slack.add_message(root.channel, "U2", reply, thread_ts=root.ts)
    event = {"type": "message", "channel": root.channel, "user": "U2", "text": reply, "ts": msg.ts,
             "thread_ts": root.ts, "channel_type": "channel", "event_ts": msg.ts}
    first = await agent.app.slack_client.event(event, event_id="Ev0001")
    again = await agent.app.slack_client.event(event, event_id="Ev0001", retry_num=1)  # Slack's retry
    assert first.status == 200 and again.status == 200
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    result = last_result(agent, 1)
    assert '"staging, and only tell support"' in result["content"]
    assert "bob" in result["content"] and "replying in the thread" in result["content"]
    _, question = await agent.app.api("GET", f"/api/v1/questions/{call['request_id']}")
    assert question["status"] == "answered" and question["decision"]["via"] == "thread"
    assert [a["text"] for a in question["answers"]] == [reply, reply]
    # The retry was recognised: no second answer attempt, nothing queued for the model.
    audit = await agent.app.signoff.store.audit_events(call["request_id"])  # type: ignore[union-attr]
    assert [e.type for e in audit].count("decided") == 1
    assert len(agent.model.requests) == 2 and agent.model.rejections == []


async def test_several_questions_are_answered_together_with_submit(agent: AgentApp) -> None:
    agent.model.script(message(tool_use("ask_human", TWO, id="toolu_ask")), message(text("OK.")))
    run = await agent.start("Deploy and tell people")
    [call] = await agent.waiting_calls(run["id"])
    card = await agent.app.card(call["request_id"])
    send = agent.app.slack_client.block_action
    common = {"user": "U1", "user_name": "alice", "value": call["request_id"], "channel": card.channel,
              "message_ts": card.ts}
    # Picking a radio button is acknowledged and recorded nowhere; Submit with a question left open is refused.
    picked = await send(action_id="signoff_pick_0", block_id="signoff_q0", **common)
    assert picked.status == 200
    await send(action_id="signoff_answer_submit", block_id="signoff_answer",
               state_values={"signoff_q0": {"signoff_pick_0": radio("1")}}, **common)
    [refusal] = await agent.slack.wait_for("chat.postEphemeral")
    assert "question 2" in refusal.args["text"]
    await send(action_id="signoff_answer_submit", block_id="signoff_answer", state_values={
        "signoff_q0": {"signoff_pick_0": radio("1")},
        "signoff_q1": {"signoff_pick_1": checkboxes(["0", "1"])},
    }, **common)
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    content = last_result(agent, 1)["content"]
    assert "1. Which environment? -> production" in content
    assert "2. Who should hear about it? -> support, sales" in content


async def test_external_agent_question_over_the_api(agent: AgentApp) -> None:
    status, body = await agent.app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1",
                                                                          "requested_by": "deploy-bot"})
    assert status == 201, body
    assert body["kind"] == "question" and body["status"] == "pending" and body["answers"] is None
    card = await agent.app.card(body["id"])
    assert card.thread_ts is None  # a top-level card in the channel
    waiter = asyncio.create_task(agent.app.api("GET", f"/api/v1/questions/{body['id']}?wait=10"))
    await long_poll_registered(agent.app.url)
    buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    await agent.app.slack_client.block_action(
        user="U3", user_name="carol", action_id=buttons[1]["action_id"], value=body["id"], block_id="signoff_q0",
        channel=card.channel, message_ts=card.ts)
    status, answered = await waiter
    assert status == 200 and answered["status"] == "answered"
    assert answered["answers"] == [{"question": "Which environment?", "selected": ["production"], "text": None}]
    assert answered["decision"]["decided_by"] == {"id": "U3", "name": "carol"}

    # A reply in the thread of a question card answers it too.
    status, second = await agent.app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1"})
    card = await agent.app.card(second["id"])
    msg = agent.slack.add_message("C1", "U1", "neither, wait until Monday", thread_ts=card.ts)
    await agent.app.slack_client.event({"type": "message", "channel": "C1", "user": "U1", "text": msg.text,
                                        "ts": msg.ts, "thread_ts": card.ts, "channel_type": "channel"})
    _, replied = await agent.app.api("GET", f"/api/v1/questions/{second['id']}?wait=10")
    assert replied["status"] == "answered" and replied["answers"][0]["text"] == "neither, wait until Monday"


async def test_question_api_refuses_bad_questions(agent: AgentApp) -> None:
    one_option = {"questions": [{"question": "Sure?", "options": [{"label": "yes"}]}], "channel": "C1"}
    status, body = await agent.app.api("POST", "/api/v1/questions", json=one_option)
    assert status == 400 and body["error"]["details"][0]["field"].startswith("questions.0.options")
    same = {"questions": [{"question": "Sure?", "options": [{"label": "yes"}, {"label": "Yes"}]}], "channel": "C1"}
    status, body = await agent.app.api("POST", "/api/v1/questions", json=same)
    assert status == 400 and "different" in body["error"]["message"]
    status, body = await agent.app.api("GET", "/api/v1/questions/apr_00000000000000000000000000")
    assert status == 404
    # A user group Slack does not know: nobody could ever answer. Refused like an approval's, nothing stored.
    agent.slack.add_usergroup("SOPS", ["U1"])
    status, body = await agent.app.api("POST", "/api/v1/questions",
                                       json={**ONE, "channel": "C1", "approvers": ["SOPS", "SNOPE"]})
    assert status == 400 and body["error"]["details"] == [
        {"field": "approvers.1", "message": "SNOPE is not a user group in this Slack workspace"}]
    _, listed = await agent.app.api("GET", "/api/v1/approvals?status=pending")
    assert listed["items"] == []
    status, body = await agent.app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1", "approvers": ["SOPS"]})
    assert status == 201 and body["status"] == "pending"


async def test_only_the_people_asked_may_answer(agent: AgentApp) -> None:
    status, body = await agent.app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1",
                                                                          "approvers": ["U1"]})
    assert status == 201
    card = await agent.app.card(body["id"])
    buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    await agent.app.slack_client.block_action(user="UOUT", action_id=buttons[0]["action_id"], value=body["id"],
                                              block_id="signoff_q0", channel="C1", message_ts=card.ts)
    msg = agent.slack.add_message("C1", "UOUT", "production!", thread_ts=card.ts)
    await agent.app.slack_client.event({"type": "message", "channel": "C1", "user": "UOUT", "text": msg.text,
                                        "ts": msg.ts, "thread_ts": card.ts, "channel_type": "channel"})
    refusals = await agent.slack.wait_for("chat.postEphemeral", count=2)
    assert all("not one of the people asked" in r.args["text"] for r in refusals)
    _, still = await agent.app.api("GET", f"/api/v1/questions/{body['id']}")
    assert still["status"] == "pending"


async def test_approve_button_with_a_question_id_is_refused(agent: AgentApp) -> None:
    """A forged (or App Home) Approve on a question: refused clearly, nothing written."""
    app = agent.app
    status, question = await app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1"})
    assert status == 201, question
    card = await app.card(question["id"])
    assert app.signoff is not None
    await app.signoff.dispatcher.drain()
    before = await app.signoff.store.get_request(question["id"])
    resp = await app.slack_client.block_action(user="U1", action_id="signoff_approve", value=question["id"],
                                               block_id="decide", channel=card.channel, message_ts=card.ts)
    assert resp.status == 200
    [note] = await app.slack.wait_for("chat.postEphemeral")
    assert "This is a question, not an approval" in note.args["text"]
    assert await app.signoff.store.get_request(question["id"]) == before


async def test_a_thread_answer_reaches_the_agent_as_the_person_typed_it(agent: AgentApp) -> None:
    """Slack escapes &, <, > and wraps mentions and links; the typed answer is what the person wrote."""
    status, asked = await agent.app.api("POST", "/api/v1/questions", json={**ONE, "channel": "C1"})
    assert status == 201, asked
    card = await agent.app.card(asked["id"])
    sent = "Smith &amp; Sons &lt;ltd&gt;, ask <@U2|bob>; see <https://x.example/a?b=1&amp;c=2|the runbook>"
    msg = agent.slack.add_message("C1", "U1", sent, thread_ts=card.ts)
    await agent.app.slack_client.event({"type": "message", "channel": "C1", "user": "U1", "text": sent,
                                        "ts": msg.ts, "thread_ts": card.ts, "channel_type": "channel"})
    _, replied = await agent.app.api("GET", f"/api/v1/questions/{asked['id']}?wait=10")
    assert replied["status"] == "answered", replied
    assert replied["answers"][0]["text"] == (
        "Smith & Sons <ltd>, ask @bob; see the runbook (https://x.example/a?b=1&c=2)")


@pytest.mark.parametrize("how", ["button", "thread"])
async def test_an_answer_from_someone_taken_away_meanwhile_is_refused_and_writes_nothing(
        agent: AgentApp, how: str) -> None:
    """The answer is checked (who is in SOPS: Slack holds that answer) while another process takes
    the person away; the answer is recorded only on a state on which they may (bot/approvals/checked.py)."""
    app = agent.app
    assert app.signoff is not None
    agent.slack.add_usergroup("SOPS", ["U1"])
    directory = app.signoff.service.directory
    assert isinstance(directory, SlackDirectory)
    directory.ttl = 0  # every check asks Slack who is in the group
    question_id, card, before = await question_to_sops(agent)
    await written_during_the_check(app, question_id, answer_by(agent, how, question_id, card), approvers=("U9",))
    [refusal] = await agent.slack.wait_for("chat.postEphemeral")
    assert "not one of the people asked" in refusal.args["text"]
    await drain(app)
    stored = await app.signoff.store.get_request(question_id)
    assert stored is not None and stored.status is Status.PENDING and stored.version == before.version + 1
    assert stored.decision is None
    assert "decided" not in [e.type for e in await app.signoff.store.audit_events(question_id)]
