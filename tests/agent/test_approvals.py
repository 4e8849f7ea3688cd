"""Gated tool calls in a run's thread: edit, reject, two calls in one turn, policy tiers."""

from __future__ import annotations

import email
import json
from pathlib import Path

from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from bot.sandbox import SlackEmulator as FakeSlack
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from bot.sandbox.signed import checkboxes, plain_input
from tests.support.app import start_app

EMAIL = {"to": "customer@example.com", "subject": "Refund", "body": "Hello,\nyour refund is on its way."}


def tool_results(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]


def result_text(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "\n".join(b["text"] for b in content)


async def test_edited_email_runs_once_with_the_edit_and_the_model_is_told(agent: AgentApp) -> None:
    agent.model.script(
        message(text("I'll email the customer."), tool_use("send_email", EMAIL, id="toolu_email")),
        message(text("The email went out.")),
    )
    run = await agent.start("Tell the customer their refund is on its way")
    [call] = await agent.waiting_calls(run["id"])
    root = await agent.root(run["id"])
    card = await agent.app.card(call["request_id"])
    # The card is a reply in the run's thread, and shows the email itself.
    assert card.thread_ts == root.ts and card.channel == "C1"
    shown = json.dumps(card.blocks)
    assert "Email" in shown and "customer@example.com" in shown and "Refund" in shown and "your refund" in shown
    assert agent.emails() == []

    await agent.app.click(call["request_id"], "U1", action="signoff_edit", user_name="alice")
    [opened] = await agent.slack.wait_for("views.open")
    view = opened.args["view"]
    values = {
        "p:to": {"value": plain_input(EMAIL["to"])},
        "p:subject": {"value": plain_input("Your refund of $45")},
        "p:body": {"value": plain_input(EMAIL["body"])},
        "p:cc": {"value": plain_input(None)},
    }
    response = await agent.app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit", private_metadata=view["private_metadata"],
        values=values,
    )
    assert response.status == 200 and response.text in ("", "{}"), response.text
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done

    [sent] = agent.emails()  # ran exactly once, with the edited subject
    mail = email.message_from_bytes(sent.read_bytes())
    assert mail["Subject"] == "Your refund of $45" and mail["To"] == "customer@example.com"
    assert done["tool_calls"][0]["final_input"]["subject"] == "Your refund of $45"

    assert len(agent.model.requests) == 2 and agent.model.rejections == []
    [result] = tool_results(agent.model.requests[1])
    assert result["tool_use_id"] == "toolu_email" and not result.get("is_error")
    said = result_text(result)
    assert "alice" in said and 'subject: "Refund" -> "Your refund of $45"' in said
    assert "sent" in said


async def test_rejection_reason_reaches_the_model_and_the_run_goes_on(agent: AgentApp) -> None:
    agent.model.script(
        message(tool_use("send_email", EMAIL, id="toolu_email")),
        message(text("Understood, I will not email them."), tool_use("list_files", {}, id="toolu_list")),
        message(text("Done without emailing.")),
    )
    run = await agent.start("Tell the customer")
    [call] = await agent.waiting_calls(run["id"])
    await agent.app.click(call["request_id"], "U2", action="signoff_reject", user_name="bob")
    [opened] = await agent.slack.wait_for("views.open")
    await agent.app.slack_client.view_submission(
        user="U2", user_name="bob", callback_id="signoff_reject",
        private_metadata=opened.args["view"]["private_metadata"],
        values={"reason": {"value": plain_input("Wrong customer: this one already got a refund")}},
    )
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed" and done["step_count"] == 3, done
    assert agent.emails() == []
    [result] = tool_results(agent.model.requests[1])
    assert result["tool_use_id"] == "toolu_email" and result["is_error"] is True
    assert "Wrong customer: this one already got a refund" in result_text(result)
    assert "bob" in result_text(result)
    assert agent.model.rejections == []


async def test_two_calls_in_one_turn_share_one_card_one_approved_one_rejected(agent: AgentApp) -> None:
    agent.workspace.mkdir()
    (agent.workspace / "plan.md").write_text("old plan\n")
    agent.model.script(
        message(
            text("Two things."),
            tool_use("write_file", {"path": "plan.md", "content": "new plan\n"}, id="toolu_write"),
            tool_use("send_email", EMAIL, id="toolu_email"),
        ),
        message(text("Plan updated; email skipped.")),
    )
    run = await agent.start("Update the plan and tell the customer")
    calls = await agent.waiting_calls(run["id"], count=2)
    assert [c["tool_use_id"] for c in calls] == ["toolu_write", "toolu_email"]
    assert calls[0]["request_id"] == calls[1]["request_id"]  # one batch card for the turn
    root = await agent.root(run["id"])
    card = await agent.app.card(calls[0]["request_id"])
    assert card.thread_ts == root.ts
    assert "plan.md" in json.dumps(card.blocks) and "customer@example.com" in json.dumps(card.blocks)

    # Tick the write only: the write runs, the email is rejected, one model call follows.
    await agent.app.slack_client.block_action(
        user="U1", user_name="alice", action_id="signoff_batch_approve", value=calls[0]["request_id"],
        block_id="batch:0", channel=card.channel, message_ts=card.ts,
        state_values={"item:0": {"signoff_item_pick": checkboxes(["approve"])}})
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    assert len(agent.model.requests) == 2 and agent.model.rejections == []
    write, mail = tool_results(agent.model.requests[1])
    assert (write["tool_use_id"], mail["tool_use_id"]) == ("toolu_write", "toolu_email")
    assert not write.get("is_error") and "wrote" in result_text(write) and "alice" in result_text(write)
    assert mail["is_error"] is True and "Rejected by alice" in result_text(mail)
    assert (agent.workspace / "plan.md").read_text() == "new plan\n"
    assert agent.emails() == []


async def test_policy_tiers_low_runs_silently_medium_posts_an_fyi(
    db_url: str, slack: FakeSlack, model: FakeAnthropic, tmp_path: Path,
) -> None:
    """fetch_url asks by default (issue 9); an operator may make it medium, and loopback must be allowed."""
    from aiohttp import web

    running = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_FETCH_URL_RISK="medium",
                                                           SIGNOFF_EGRESS_ALLOW="127.0.0.1"))
    agent = AgentApp(running, model, tmp_path)

    hits: list[str] = []

    async def page(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="pricing: $10")

    site_app = web.Application()
    site_app.router.add_get("/pricing", page)
    runner = web.AppRunner(site_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/pricing"
    try:
        agent.model.script(
            message(tool_use("list_files", {}, id="toolu_list"), tool_use("fetch_url", {"url": url}, id="toolu_get")),
            message(text("Prices are $10.")),
        )
        run = await agent.start("Check the pricing page")
        done = await agent.wait_status(run["id"], "completed", "failed")
        assert done["status"] == "completed", done
        assert hits == ["/pricing"]
        assert all(c["request_id"] is None and c["gate"] == "allow" for c in done["tool_calls"])
        listed, fetched = tool_results(agent.model.requests[1])
        assert "pricing: $10" in result_text(fetched)
        root = await agent.root(run["id"])
        await agent.app.signoff.dispatcher.drain()  # type: ignore[union-attr]
        notes = [m.text for m in agent.thread(root)]
        assert any("fetch_url" in t and "medium" in t for t in notes), notes
        assert not any("list_files" in t for t in notes)
        assert not agent.slack.calls_to("views.open")
    finally:
        await runner.cleanup()
        await running.stop()
