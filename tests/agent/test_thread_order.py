"""Thread messages reach the model in the order people wrote them (Slack's ts), not the order their
events were processed in (issue 9, defect 7: the source of an intermittent failure)."""

from __future__ import annotations

from tests.agent.helpers import AgentApp
from bot.sandbox.model import message, text, tool_use

EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Hello"}


async def test_two_peoples_messages_keep_slacks_order(agent: AgentApp) -> None:
    agent.model.script(message(tool_use("send_email", EMAIL, id="toolu_email")), message(text("Done.")))
    run = await agent.start("Email the customer")
    [call] = await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    first = agent.slack.add_message(root.channel, "U1", "first: cc finance", thread_ts=root.ts)
    second = agent.slack.add_message(root.channel, "U2", "second: and sign as Support", thread_ts=root.ts)
    assert float(first.ts) < float(second.ts)
    for msg in (second, first):  # Slack delivered (or we processed) the later one first
        event = {"type": "message", "channel": root.channel, "user": msg.user, "text": msg.text, "ts": msg.ts,
                 "thread_ts": root.ts, "channel_type": "channel"}
        await agent.app.slack_client.event(event)
        await agent.slack.wait_for("chat.postEphemeral", count=1 if msg is second else 2)  # "Noted" each
    await agent.app.click(call["request_id"], "U3", user_name="carol")
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    content = agent.model.requests[1]["messages"][-1]["content"]
    texts = [b["text"] for b in content if b["type"] == "text"]
    assert texts[0].endswith("first: cc finance") and texts[1].endswith("second: and sign as Support"), texts
