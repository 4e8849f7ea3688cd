"""Approved, then failed when run (issue 34, item 4): the card, the run's messages, App Home and the API
say so; a run whose approved calls all worked reads as before."""

from __future__ import annotations

import json
from typing import Any

from bot.sandbox import Message
from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import checkboxes
from tests.support.outbox import settle
from tests.agent.helpers import AgentApp


OUTSIDE = {"path": "../outside.md", "content": "where it must not go\n"}  # refused when run: outside the workspace


async def open_home(agent: AgentApp, user: str) -> None:
    response = await agent.app.slack_client.event({"type": "app_home_opened", "user": user, "channel": f"D{user}",
                                                   "tab": "home", "event_ts": "1700000000.000100"})
    assert response.status == 200
    await agent.slack.wait_for("views.publish")


def shown(msg: Message) -> str:
    return msg.text + "\n" + json.dumps(msg.blocks, ensure_ascii=False)


def home_text(agent: AgentApp, user: str) -> str:
    return json.dumps(agent.slack.home_views[user]["blocks"], ensure_ascii=False)


async def request(agent: AgentApp, request_id: str) -> dict[str, Any]:
    status, body = await agent.app.api("GET", f"/api/v1/approvals/{request_id}")
    assert status == 200, body
    return body


async def test_an_approved_call_that_fails_when_run_shows_as_failed_everywhere(agent: AgentApp) -> None:
    agent.model.script(
        message(text("Writing the note."), tool_use("write_file", OUTSIDE, id="toolu_w")),
        message(text("I wrote the note.")),  # the model may well claim success: the run must not
    )
    await open_home(agent, "U1")
    run = await agent.start("Write the note")
    [call] = await agent.waiting_calls(run["id"])
    await agent.app.click(call["request_id"], "U1", user_name="alice")
    done = await agent.wait_status(run["id"], "completed", "failed")
    await settle(agent.app)

    [made] = done["tool_calls"]
    assert done["status"] == "completed" and made["is_error"] and made["attempts"] == 1, done

    card = await agent.app.card(call["request_id"])
    said = shown(card)
    assert "Approved by <@U1>, then failed when run" in said and "outside the workspace" in said, said
    assert card.text.startswith("Approved, then failed when run")

    root = await agent.root(run["id"])
    assert "Finished with 1 failed step" in shown(root) and "Completed" not in shown(root), shown(root)
    final = agent.thread(root)[-1]
    assert "Finished with 1 failed step" in shown(final) and "Done after" not in shown(final), shown(final)

    home = home_text(agent, "U1")
    assert "Failed when run" in home and "✅ Approved" not in home, home

    body = await request(agent, call["request_id"])
    assert body["status"] == "approved"  # what the person decided stays as it was
    assert body["outcome"]["status"] == "failed" and "outside the workspace" in body["outcome"]["error"]
    assert body["outcome"]["at"]
    assert done["failed_steps"] == 1

    # Delivered once: the card's failure line is one update, whatever replays.
    outcome_updates = [c for c in agent.slack.calls_to("chat.update") if c.args.get("ts") == card.ts
                       and "then failed when run" in json.dumps(c.args.get("blocks"))]
    assert len(outcome_updates) == 1


async def test_a_batch_shows_the_one_item_that_failed_on_its_own_line(agent: AgentApp) -> None:
    agent.workspace.mkdir()
    agent.model.script(
        message(
            text("Two writes."),
            tool_use("write_file", {"path": "notes.md", "content": "fine\n"}, id="toolu_ok"),
            tool_use("write_file", OUTSIDE, id="toolu_bad"),
        ),
        message(text("Both written.")),
    )
    await open_home(agent, "U1")
    run = await agent.start("Write two notes")
    calls = await agent.waiting_calls(run["id"], count=2)
    request_id = calls[0]["request_id"]
    assert calls[1]["request_id"] == request_id  # one batch card
    card = await agent.app.card(request_id)
    await agent.app.slack_client.block_action(
        user="U1", user_name="alice", action_id="signoff_batch_approve", value=request_id,
        block_id="batch:0", channel=card.channel, message_ts=card.ts,
        state_values={"item:0": {"signoff_item_pick": checkboxes(["approve"])},
                      "item:1": {"signoff_item_pick": checkboxes(["approve"])}})
    done = await agent.wait_status(run["id"], "completed", "failed")
    await settle(agent.app)

    assert done["status"] == "completed", done
    assert (agent.workspace / "notes.md").read_text() == "fine\n"

    card = await agent.app.card(request_id)
    lines = [b["text"]["text"] for b in card.blocks if b["type"] == "section" and b["text"]["type"] == "plain_text"]
    good = next(line for line in lines if "notes.md" in line)
    bad = next(line for line in lines if "outside.md" in line)
    assert good.startswith("✅") and bad.startswith("⚠️"), lines
    notes = [e["text"] for b in card.blocks if b["type"] == "context" for e in b["elements"]]
    assert any("Approved by alice, then failed when run" in n and "outside the workspace" in n for n in notes), notes
    assert not any("notes.md" in n and "failed" in n for n in notes)

    root = await agent.root(run["id"])
    assert "Finished with 1 failed step" in shown(root), shown(root)
    assert "Failed when run" in home_text(agent, "U1")

    body = await request(agent, request_id)
    items = body["outcome"]["items"]
    assert sorted(items) == ["toolu_bad", "toolu_ok"] and items["toolu_bad"]["status"] == "failed"
    assert items["toolu_ok"]["status"] == "ran" and items["toolu_ok"]["same_params"] is True  # issue 37: receipts
    assert "outside the workspace" in items["toolu_bad"]["error"]
    assert done["failed_steps"] == 1


async def test_a_run_whose_approved_calls_worked_reads_as_before_with_a_receipt(agent: AgentApp) -> None:
    agent.model.script(
        message(tool_use("write_file", {"path": "notes.md", "content": "fine\n"}, id="toolu_ok")),
        message(text("Written.")),
    )
    run = await agent.start("Write a note")
    [call] = await agent.waiting_calls(run["id"])
    await agent.app.click(call["request_id"], "U1", user_name="alice")
    done = await agent.wait_status(run["id"], "completed", "failed")
    await settle(agent.app)
    root = await agent.root(run["id"])
    assert "✅ Completed" in shown(root) and "failed" not in shown(root).lower()
    assert "Done after 2 steps" in shown(agent.thread(root)[-1])
    card = await agent.app.card(call["request_id"])
    assert "failed" not in shown(card).lower()
    # Issue 37: the runner reports what ran, with the approved parameters, on the card and in the API.
    assert "with the approved parameters" in shown(card), shown(card)
    body = await request(agent, call["request_id"])
    assert body["outcome_status"] == "ran" and body["outcome"]["by"] == "runner"
    assert body["outcome"]["params"] == {"path": "notes.md", "content": "fine\n"} and body["outcome"]["same_params"]
    assert agent.app.signoff is not None
    [ran] = [e for e in await agent.app.signoff.store.audit_events(call["request_id"]) if e.type == "run_ran"]
    assert ran.data["by"] == "runner"
    assert done["failed_steps"] == 0
