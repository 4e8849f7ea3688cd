"""Signoff's own runner under a policy file: the tools' declared risk is an input, never a way
around a deny; allow rules and the tier defaults decide without a card; asks post the card."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from bot.sandbox import SlackEmulator
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from tests.support.app import start_app

POLICY = """\
rules:
  - name: no-secrets
    tool: read_file
    params: {path: {glob: "*.env"}}
    effect: deny
    reason: secrets stay secret
  - name: internal-mail
    tool: send_email
    params: {to: {glob: "*@example.com"}}
    effect: allow
"""

MAIL = {"to": "ann@example.com", "subject": "Hi", "body": "Hello"}


@pytest_asyncio.fixture
async def pagent(db_url: str, slack: SlackEmulator, model: FakeAnthropic, tmp_path: Path) -> AsyncIterator[AgentApp]:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    running = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_POLICY=str(path)))
    try:
        yield AgentApp(running, model, tmp_path)
    finally:
        await running.stop()


def results(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]


def said(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "\n".join(b["text"] for b in content)


async def test_runner_deny_allow_and_tier_default(pagent: AgentApp) -> None:
    pagent.workspace.mkdir()
    (pagent.workspace / "prod.env").write_text("KEY=1\n")
    (pagent.workspace / "notes.md").write_text("notes\n")
    pagent.model.script(
        message(text("Three things."),
                tool_use("read_file", {"path": "prod.env"}, id="toolu_secret"),  # low risk, denied by a rule
                tool_use("read_file", {"path": "notes.md"}, id="toolu_notes"),  # low risk: the tier default
                tool_use("send_email", MAIL, id="toolu_mail")),  # high risk, allowed by a rule
        message(text("Done.")),
    )
    run = await pagent.start("Read and mail")
    done = await pagent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    secret, notes, mail = done["tool_calls"]
    assert secret["request_id"] and notes["request_id"] is None and mail["request_id"]
    _, denied = await pagent.app.api("GET", f"/api/v1/approvals/{secret['request_id']}")
    assert denied["status"] == "rejected" and denied["decision"]["rule"] == "no-secrets"
    _, allowed = await pagent.app.api("GET", f"/api/v1/approvals/{mail['request_id']}")
    assert allowed["status"] == "approved" and allowed["decision"]["rule"] == "internal-mail"
    r_secret, r_notes, r_mail = results(pagent.model.requests[1])
    assert r_secret["is_error"] is True and "Signoff's policy" in said(r_secret) and "secrets stay" in said(r_secret)
    assert "KEY=1" not in said(r_secret) and "notes" in said(r_notes)
    assert not r_mail.get("is_error") and "Approved by Signoff's policy" in said(r_mail)
    assert len(pagent.emails()) == 1
    assert not [c for c in pagent.slack.calls_to("chat.postMessage") if "Approval needed" in str(c.args.get("text"))]


async def test_runner_asks_outside_the_rules(pagent: AgentApp) -> None:
    pagent.model.script(
        message(tool_use("send_email", {**MAIL, "to": "ann@else.org"}, id="toolu_mail")),
        message(text("Sent.")),
    )
    run = await pagent.start("Mail someone else")
    [call] = await pagent.waiting_calls(run["id"])
    card = await pagent.app.card(call["request_id"])
    assert "signoff_remember" in str(card.blocks)
    await pagent.app.click(call["request_id"], "U1")
    done = await pagent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed" and len(pagent.emails()) == 1


async def test_runner_batches_only_what_policy_leaves_to_a_person(pagent: AgentApp) -> None:
    pagent.workspace.mkdir()
    (pagent.workspace / "prod.env").write_text("KEY=1\n")
    pagent.model.script(
        message(tool_use("send_email", {**MAIL, "to": "a@else.org"}, id="toolu_a"),
                tool_use("read_file", {"path": "prod.env"}, id="toolu_secret"),
                tool_use("send_email", {**MAIL, "to": "b@else.org"}, id="toolu_b"),
                tool_use("send_email", MAIL, id="toolu_internal")),
        message(text("Done.")),
    )
    run = await pagent.start("Mail two people")
    waiting = await pagent.waiting_calls(run["id"], count=2)
    assert {c["tool_use_id"] for c in waiting} == {"toolu_a", "toolu_b"}
    assert len({c["request_id"] for c in waiting}) == 1  # one batch card for the two asks
    body = await pagent.run(run["id"])
    by_id = {c["tool_use_id"]: c for c in body["tool_calls"]}
    assert by_id["toolu_secret"]["request_id"] not in {c["request_id"] for c in waiting}
    assert by_id["toolu_internal"]["request_id"] not in {c["request_id"] for c in waiting}
    _, batch = await pagent.app.api("GET", f"/api/v1/approvals/{waiting[0]['request_id']}")
    assert [i["key"] for i in batch["items"]] == ["toolu_a", "toolu_b"]
