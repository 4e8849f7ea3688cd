"""People in the run's thread: messages injected at the next step, Cancel, and failures said out loud."""

from __future__ import annotations

import json

import pytest

from tests.agent.helpers import AgentApp
from bot.sandbox.model import error, message, text, tool_use

EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Hello"}


async def test_thread_message_reaches_the_next_model_request(agent: AgentApp) -> None:
    agent.model.script(
        message(tool_use("send_email", EMAIL, id="toolu_email")),
        message(text("Noted, I will cc finance next time.")),
    )
    run = await agent.start("Email the customer")
    [call] = await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    first = agent.slack.add_message(root.channel, "U1", "Please cc finance@example.com", thread_ts=root.ts)
    event = {"type": "message", "channel": root.channel, "user": "U1", "text": first.text, "ts": first.ts,
             "thread_ts": root.ts, "channel_type": "channel"}
    await agent.app.slack_client.event(event, event_id="EvCC")
    await agent.app.slack_client.event(event, event_id="EvCC", retry_num=1)  # Slack retried: the same event
    await agent.thread_reply(root, "U2", "and sign it as Support")
    await agent.slack.wait_for("chat.postEphemeral", count=2)  # "Noted" to each person
    assert len(agent.model.requests) == 1  # queued: nothing reaches the model before the next step

    await agent.app.click(call["request_id"], "U1", user_name="alice")
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    content = agent.model.requests[1]["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["tool_result", "text", "text"]  # results first, as the API requires
    assert content[0]["tool_use_id"] == "toolu_email"
    assert "alice" in content[1]["text"] and content[1]["text"].endswith("Please cc finance@example.com")
    assert content[2]["text"].endswith("and sign it as Support")
    assert agent.model.rejections == []
    queued = await agent.app.signoff.agent.runs.interventions(run["id"])  # type: ignore[union-attr]
    assert len(queued) == 2  # the retried event was recognised by its event_id


async def test_bot_messages_and_other_threads_are_ignored(agent: AgentApp) -> None:
    agent.model.script(message(tool_use("send_email", EMAIL, id="toolu_email")), message(text("done")))
    run = await agent.start("Email the customer")
    [call] = await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    await agent.thread_reply(root, "U1", "from a bot", bot_id="B2")
    other = agent.slack.add_message("C1", "U1", "unrelated")
    await agent.thread_reply(other, "U1", "reply elsewhere")
    await agent.app.click(call["request_id"], "U1")
    await agent.wait_status(run["id"], "completed")
    content = agent.model.requests[1]["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["tool_result"]


async def test_cancel_ends_the_run_and_closes_its_cards(agent: AgentApp) -> None:
    agent.model.script(message(tool_use("send_email", EMAIL, id="toolu_email")))
    run = await agent.start("Email the customer")
    [call] = await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    card = await agent.app.card(call["request_id"])
    [cancel] = [e for b in root.blocks if b["type"] == "actions" for e in b["elements"]]
    response = await agent.app.slack_client.block_action(
        user="U2", user_name="bob", action_id=cancel["action_id"], value=cancel["value"], block_id="run",
        channel=root.channel, message_ts=root.ts)
    assert response.status == 200
    done = await agent.wait_status(run["id"], "cancelled", "completed", "failed")
    assert done["status"] == "cancelled", done
    _, request = await agent.app.api("GET", f"/api/v1/approvals/{call['request_id']}")
    assert request["status"] == "cancelled"
    await agent.app.signoff.dispatcher.drain()  # type: ignore[union-attr]
    root_now = agent.slack.messages[(root.channel, root.ts)]
    assert "Cancelled" in json.dumps(root_now.blocks) and "<@U2>" in json.dumps(root_now.blocks)
    assert not any(b["type"] == "actions" for b in root_now.blocks)
    card_now = agent.slack.messages[(card.channel, card.ts)]
    assert not any(b["type"] == "actions" for b in card_now.blocks)
    assert any("cancelled" in m.text.lower() for m in agent.thread(root))
    # A late approval changes nothing and says why.
    await agent.app.click(call["request_id"], "U1")
    [late] = await agent.slack.wait_for("chat.postEphemeral")
    assert "Already cancelled" in late.args["text"]
    assert agent.emails() == [] and len(agent.model.requests) == 1
    status, body = await agent.app.api("POST", f"/api/v1/runs/{run['id']}/cancel")
    assert status == 409 and body["error"]["code"] == "not_running"


@pytest.mark.parametrize(("reply", "expected"), [
    pytest.param(error(529, "overloaded_error", "Overloaded", retry_after_ms=1), "529 overloaded_error", id="529"),
    pytest.param(error(429, "rate_limit_error", "Slow down", retry_after_ms=1), "429 rate_limit_error", id="429"),
    pytest.param(error(400, "invalid_request_error", "prompt is too long"), "400 invalid_request_error", id="400"),
])
async def test_model_errors_fail_the_run_with_a_clear_message(agent: AgentApp, reply: object, expected: str) -> None:
    agent.model.script(*[reply] * 3)  # type: ignore[list-item]
    run = await agent.start("Do something")
    done = await agent.wait_status(run["id"], "failed", "completed")
    assert done["status"] == "failed" and expected in done["error"], done
    retried = 3 if not expected.startswith("400") else 1  # the SDK retries 429/529 twice, never a 400
    assert len(agent.model.requests) == retried
    root = await agent.root(run["id"])
    await agent.app.signoff.dispatcher.drain()  # type: ignore[union-attr]
    [note] = [m for m in agent.thread(root) if "failed" in m.text]
    assert expected in json.dumps(note.blocks)
    root_now = agent.slack.messages[(root.channel, root.ts)]
    assert "Failed" in json.dumps(root_now.blocks) and expected in json.dumps(root_now.blocks)


async def test_root_message_shows_progress_and_the_final_answer(agent: AgentApp) -> None:
    agent.model.script(
        message(tool_use("list_files", {}, id="toolu_1")),
        message(tool_use("list_files", {"path": "."}, id="toolu_2")),
        message(text("Nothing here yet.")),
    )
    run = await agent.start("What is in the workspace?")
    done = await agent.wait_status(run["id"], "completed")
    assert done["step_count"] == 3 and done["result"] == "Nothing here yet."
    root = await agent.root(run["id"])
    await agent.app.signoff.dispatcher.drain()  # type: ignore[union-attr]
    root_now = agent.slack.messages[(root.channel, root.ts)]
    shown = json.dumps(root_now.blocks)
    assert "Completed" in shown and "3 steps" in shown and "What is in the workspace?" in shown
    assert root_now.update_count >= 1
    [final] = [m for m in agent.thread(root) if "Done after 3 steps" in m.text]
    assert "Nothing here yet." in json.dumps(final.blocks)


async def test_unknown_tools_and_bad_input_are_errors_the_model_sees(agent: AgentApp) -> None:
    agent.model.on_request(lambda body: message(text("fine")))
    agent.model.script(message(tool_use("send_email", {"to": "x@example.com"}, id="toolu_bad")))
    run = await agent.start("Email")
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed"
    result = agent.model.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "subject" in result["content"] and "required" in result["content"]
    assert not agent.slack.calls_to("views.open") and agent.emails() == []


async def test_run_api_validates_and_reports(agent: AgentApp) -> None:
    status, body = await agent.app.api("POST", "/api/v1/runs", json={"task": " ", "channel": "C1"})
    assert status == 400 and body["error"]["details"][0]["field"] == "task"
    status, body = await agent.app.api("POST", "/api/v1/runs", json={"task": "x", "channel": "C1", "agent": "nope"})
    assert status == 400 and "no agent named 'nope'" in body["error"]["message"]
    status, body = await agent.app.api("POST", "/api/v1/runs", json={"task": "x"})
    assert status == 400 and body["error"]["details"][0]["field"] == "channel"
    status, body = await agent.app.api("GET", "/api/v1/runs/run_00000000000000000000000000")
    assert status == 404
    status, _ = await agent.app.api("POST", "/api/v1/runs", json={"task": "x", "channel": "C1"}, auth=False)
    assert status == 401
