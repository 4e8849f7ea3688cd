"""Bound to what runs: the decision's params_sha256, the client helper, and the runner's refusal."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.params_hash import ParamsChanged, canonical_json, check_params, params_sha256
from storage.runs_schema import runs
from storage.schema import decisions
from tests.agent.conftest import agent, model  # noqa: F401 - fixtures for the run scenario
from tests.agent.helpers import AgentApp
from bot.sandbox.model import message, text, tool_use
from bot.sandbox.signed import plain_input
from tests.support.app import App


def test_canonical_json_ignores_key_order_and_whitespace_and_keeps_unicode() -> None:
    a = {"to": "zoë@example.com", "n": 1, "nested": {"b": [1, 2], "a": None}}
    b = {"nested": {"a": None, "b": [1, 2]}, "n": 1, "to": "zoë@example.com"}
    assert canonical_json(a) == canonical_json(b)
    assert canonical_json(a) == '{"n":1,"nested":{"a":null,"b":[1,2]},"to":"zoë@example.com"}'.encode()
    assert params_sha256(a) == hashlib.sha256(canonical_json(a)).hexdigest()
    assert params_sha256({"n": 1}) != params_sha256({"n": 1.0}) != params_sha256({"n": "1"})


def test_check_params_fails_closed() -> None:
    params = {"to": "a@example.com"}
    check_params({"outcome": "approved", "params_sha256": params_sha256(params)}, dict(params))
    with pytest.raises(ParamsChanged, match="differ"):
        check_params({"outcome": "approved", "params_sha256": params_sha256(params)}, {"to": "b@example.com"})
    with pytest.raises(ParamsChanged, match="not 'approved'"):
        check_params({"outcome": "rejected", "params_sha256": params_sha256(params)}, params)
    with pytest.raises(ParamsChanged, match="no params_sha256"):
        check_params({"outcome": "approved"}, params)


async def test_the_decision_carries_the_hash_of_the_edited_parameters(app: App) -> None:
    req = await app.submit()
    await app.click(req["id"], "U1", action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    values = {"p:to": {"value": plain_input("zoë@example.com")},
              "p:subject": {"value": plain_input("Grüße")}, "p:body": {"value": plain_input("Hi")}}
    await app.slack_client.view_submission(user="U1", callback_id="signoff_edit", values=values,
                                           private_metadata=opened.args["view"]["private_metadata"])
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    decision = body["decision"]
    assert decision["params"] == {"to": "zoë@example.com", "subject": "Grüße", "body": "Hi"}
    assert decision["params_sha256"] == params_sha256(decision["params"])
    check_params(decision, {"body": "Hi", "subject": "Grüße", "to": "zoë@example.com"})  # what a client does
    with pytest.raises(ParamsChanged):
        check_params(decision, req["action"]["params"])  # the proposal is not what was approved


async def test_the_runner_refuses_parameters_whose_hash_differs(agent: AgentApp) -> None:
    email = {"to": "customer@example.com", "subject": "Refund", "body": "Hello"}
    agent.model.script(message(tool_use("send_email", email, id="toolu_email")), message(text("Done.")))
    run = await agent.start("Email the customer")
    [call] = await agent.waiting_calls(run["id"])
    store = agent.app.signoff.store  # type: ignore[union-attr]
    # Another process holds the run (as if it were working on it), so the approval does not run it yet...
    async with store.engine.begin() as conn:
        await conn.execute(runs.update().where(runs.c.id == run["id"]).values(
            lease_owner="elsewhere", lease_until=datetime.now(UTC) + timedelta(hours=1)))
    await agent.app.click(call["request_id"], "U1", user_name="alice")
    _, decided = await agent.app.api("GET", f"/api/v1/approvals/{call['request_id']}?wait=5")
    assert decided["status"] == "approved"
    # ...while the stored parameters are changed behind the decision's back.
    async with store.engine.begin() as conn:
        await conn.execute(decisions.update().where(decisions.c.request_id == call["request_id"]).values(
            params={**email, "to": "attacker@example.com"}))
        await conn.execute(runs.update().where(runs.c.id == run["id"]).values(lease_owner=None, lease_until=None))
    agent.app.signoff.agent.runner.kick(run["id"])  # type: ignore[union-attr]
    done = await agent.wait_status(run["id"], "completed", "failed")
    assert done["status"] == "completed", done
    assert agent.emails() == []  # nothing was sent, to anyone
    [result] = [b for b in agent.model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["is_error"] is True and "not the approved ones" in json.dumps(result["content"])
