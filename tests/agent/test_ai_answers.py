"""A person's question in an agent run's thread (docs/ai-notes.md): answered by the model with tools
disabled while the run waits on a card, without resuming the run; the agent's own questions and
people's instructions keep the thread as before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bot.sandbox.model import message, text, tool_use
from tests.agent.helpers import AgentApp
from tests.fakes.gullible_model import gullible
from tests.support.outbox import settle
from tests.support.waits import metric, until_metric

EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Hello,\nyour refund is on its way."}
ONE = {"questions": [{"question": "Which environment?", "options": [{"label": "staging"}, {"label": "production"}]}]}


def agent_turns_then(model: Any, *turns: Any) -> None:
    """The run's turns (requests that declare tools) from `turns`, in order; every other request (an
    answer, which declares none) from the gullible reader."""
    queue = list(turns)

    def reply(body: dict[str, Any]) -> Any:
        if body.get("tools"):
            return queue.pop(0)
        return gullible(body)

    model.on_request(reply)


def ai_answers(agent: AgentApp, root: Any) -> list[Any]:
    return [m for m in agent.thread(root) if "AI answer" in m.text]


async def test_a_question_while_the_run_waits_on_a_card_is_answered_without_resuming_it(agent: AgentApp) -> None:
    agent_turns_then(agent.model, message(text("I'll email the customer."), tool_use("send_email", EMAIL, id="t1")),
                     message(text("The email went out.")))
    run = await agent.start("Tell the customer their refund is on its way")
    [call] = await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    turns = len(agent.model.requests)

    await agent.thread_reply(root, "U1", "why this address?")
    await until_metric(agent.app.url, "signoff_ai_calls_total", 1, use="answer", result="answered")
    await settle(agent.app)
    [answer] = ai_answers(agent, root)
    shown = json.dumps(answer.blocks)
    assert "why this address?" in shown and "send_email" in shown  # its last step: the call it waits on
    assert "not passed to the agent" in shown
    [asked] = agent.model.requests[turns:]
    assert "tools" not in asked and "recent_steps_of_the_run" in asked["messages"][0]["content"]
    assert (await agent.run(run["id"]))["status"] == "waiting"
    assert agent.app.signoff is not None and agent.app.signoff.agent is not None
    assert await agent.app.signoff.agent.runs.interventions(run["id"]) == []
    assert agent.emails() == []

    await agent.app.click(call["request_id"], "U1")
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed" and len(agent.emails()) == 1
    assert "why this address" not in json.dumps(agent.model.requests[-1])  # never the agent's


async def test_a_reply_to_the_agents_open_question_stays_its_answer(agent: AgentApp) -> None:
    agent_turns_then(agent.model, message(tool_use("ask_human", ONE, id="q1")), message(text("Using staging.")))
    run = await agent.start("Deploy it")
    await agent.wait_status(run["id"], "waiting")
    root = await agent.root(run["id"])
    await agent.thread_reply(root, "U1", "is staging the safe one?")
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed"
    assert "is staging the safe one?" in json.dumps(agent.model.requests[-1]["messages"][-1])
    assert await metric(agent.app.url, "signoff_ai_calls_total", use="answer", result="answered") == 0
    assert ai_answers(agent, root) == []


async def test_an_instruction_while_the_run_waits_is_still_the_agents(agent: AgentApp) -> None:
    agent_turns_then(agent.model, message(tool_use("send_email", EMAIL, id="t1")), message(text("Done.")))
    run = await agent.start("Tell the customer")
    await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    await agent.thread_reply(root, "U1", "can you cc finance?")
    assert agent.app.signoff is not None and agent.app.signoff.agent is not None
    while agent.app.signoff.background:  # the listener runs after the ack: wait for it to finish
        await asyncio.wait(list(agent.app.signoff.background))
    [queued] = await agent.app.signoff.agent.runs.interventions(run["id"])
    assert queued.text == "can you cc finance?"
    assert await metric(agent.app.url, "signoff_ai_calls_total", use="answer", result="answered") == 0
