"""Claude's permission suggestions end to end over HTTP and signed Slack clicks: the card offers
"Approve & always allow Bash(npm test *)", one tap approves and makes the grant, the next matching
call is approved without a card (`via: grant`), calls outside the match still ask, and nothing can
accept a suggestion that is not offered (quorum, critical, separation of duties, forged buttons).
Bad `suggestions` payloads are a 400 naming the field, with nothing written."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.support.app import API_TOKEN, App, approval_body
from tests.support.docs import doc_example
from tests.support.app import submit_body

POLICY = """\
rules:
  - name: no-publishing
    tool: Bash
    params: {command: {regex: "--publish"}}
    effect: deny
    reason: releases go through CI
  - name: drops-are-critical
    tool: drop_table
    tier: critical
"""
AGENT = "Claude Code on host-1"
NPM = {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test *"}], "behavior": "allow",
       "destination": "localSettings"}
OTHER_TOKEN = "tok-other-agent-9"
OTHER = f"other-agent:{OTHER_TOKEN}:agent"
SET_MODE = {"type": "setMode", "mode": "acceptEdits", "destination": "session"}


pytestmark = pytest.mark.policy(POLICY, SIGNOFF_API_TOKENS=f"{API_TOKEN},{OTHER}")  # the harness's admin token and another agent's


def bash(command: str, description: str = "Run the tests", more: dict[str, Any] | None = None,
         **kw: Any) -> dict[str, Any]:
    params = {"command": command, "description": description, **(more or {})}
    body = approval_body(action={"name": "Bash", "params": params},
                         preview=None, summary=f"Claude Code wants to run {command}", requested_by=AGENT,
                         approvers=["U1", "U2"])
    body.update(kw)
    return body


async def submit(app: App, body: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    return await submit_body(app, body, token=token)


def buttons(card: Any) -> dict[str, str]:
    return {e["action_id"]: e["text"]["text"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]}


def notes(card: Any) -> str:
    return json.dumps([b for b in card.blocks if b["type"] == "context"], ensure_ascii=False)


async def tap(app: App, request_id: str, user: str, index: int = 0) -> None:
    card = await app.card(request_id)
    await app.slack_client.block_action(user=user, user_name={"U1": "alice"}.get(user, user),
                                        action_id=f"signoff_suggest_{index}", value=request_id, block_id="decide",
                                        channel=card.channel, message_ts=card.ts)


async def last_note(app: App, count: int) -> str:
    found = await app.slack.wait_for("chat.postEphemeral", count=count)
    return str(found[-1].args["text"])


async def test_one_tap_approves_remembers_and_the_next_matching_call_needs_no_card(papp: App) -> None:
    first = await submit(papp, bash("npm test -- --ci", suggestions=[SET_MODE, NPM], session="sess-1"))
    assert first["status"] == "pending" and first["suggestions"] == [SET_MODE, NPM]
    card = await papp.card(first["id"])
    assert buttons(card)["signoff_suggest_1"] == "Approve & always allow Bash(npm test *)"
    assert "signoff_suggest_0" not in buttons(card)  # setMode: shown, not offered
    assert "Claude suggests: always allow Bash commands that start with “npm test”, for this agent (token-1)" \
        in notes(card)
    assert "“switch to acceptEdits mode” (Signoff remembers tool rules" in notes(card)

    await tap(papp, first["id"], "U1", index=1)
    _, decided = await papp.api("GET", f"/api/v1/approvals/{first['id']}?wait=5")
    assert decided["status"] == "approved" and decided["decision"]["decided_by"]["id"] == "U1"
    accepted = decided["decision"]["suggestion"]
    assert (accepted["index"], accepted["update"]) == (1, NPM)
    assert "Approved, and from now on Signoff will always allow" in await last_note(papp, 1)

    _, grants = await papp.api("GET", "/api/v1/grants")
    [grant] = grants["items"]
    assert accepted["grant_ids"] == [grant["id"]]
    assert grant["tool"] == "Bash" and grant["match"] == {"command": {"op": "command", "value": "npm test *"}}
    assert (grant["scope"], grant["scope_value"], grant["any_other_params"]) == ("agent", "token-1", True)
    assert (grant["created_by"], grant["request_id"], grant["expires_at"]) == ("U1", first["id"], None)
    assert papp.signoff is not None
    audit = [e.type for e in await papp.signoff.store.audit_events(grant["id"])]
    assert audit == ["grant_created"]
    await papp.slack.wait_for("chat.update")  # the card loses its buttons and says what was accepted
    decided_card = papp.slack.messages[(card.channel, card.ts)]
    assert "signoff_suggest_1" not in buttons(decided_card) and "accepted Claude" in json.dumps(decided_card.blocks)

    # The next matching call (other arguments, another description, an extra parameter): no card.
    posts = len(papp.slack.calls_to("chat.postMessage"))
    second = await submit(papp, bash("npm test -- --watch=false", "Again", {"timeout": 60000}, session="sess-2"))
    assert second["status"] == "approved" and second["card"] is None
    assert (second["decision"]["via"], second["decision"]["grant_id"]) == ("grant", grant["id"])

    # A deny rule still wins over the grant.
    denied = await submit(papp, bash("npm test -- --publish"))
    assert (denied["status"], denied["decision"]["via"]) == ("rejected", "policy")
    assert denied["decision"]["rule"] == "no-publishing"

    # The same token under another label is the same agent: the grant applies.
    relabelled = await submit(papp, {**bash("npm test"), "requested_by": "another label"})
    assert relabelled["status"] == "approved" and relabelled["decision"]["grant_id"] == grant["id"]

    # Just outside the match: another command, a chained command, another token (even with the same
    # requested_by label): each still asks.
    outside = [(bash("npm run build"), None), (bash("npm test && curl https://evil.example"), None),
               (bash("npm test"), OTHER_TOKEN)]
    for body, token in outside:
        asked = await submit(papp, body, token)
        assert asked["status"] == "pending", body
        await papp.card(asked["id"])
    assert len(papp.slack.calls_to("chat.postMessage")) == posts + 3

    # Revoked in Slack: the very next matching call asks again.
    await papp.slack_client.block_action(user="U2", action_id="signoff_revoke_grant", value=grant["id"],
                                         block_id="grant", channel="C1")
    assert "Revoked grant" in await last_note(papp, 2)
    again = await submit(papp, bash("npm test"))
    assert again["status"] == "pending"


async def test_a_session_suggestion_is_a_grant_for_that_session_only(papp: App) -> None:
    session_rule = dict(NPM, destination="session")
    first = await submit(papp, bash("npm test", suggestions=[session_rule], session="sess-A"))
    card = await papp.card(first["id"])
    assert "in this session" in notes(card)
    await tap(papp, first["id"], "U1")
    _, decided = await papp.api("GET", f"/api/v1/approvals/{first['id']}?wait=5")
    assert decided["status"] == "approved"
    _, grants = await papp.api("GET", "/api/v1/grants")
    [grant] = grants["items"]
    assert (grant["scope"], grant["scope_value"]) == ("run", "session:token-1:sess-A")
    same = await submit(papp, bash("npm test -- -u", session="sess-A"))
    assert same["status"] == "approved" and same["decision"]["via"] == "grant"
    other = await submit(papp, bash("npm test -- -u", session="sess-B"))
    assert other["status"] == "pending"
    same_name = await submit(papp, bash("npm test -- -u", session="sess-A"), OTHER_TOKEN)  # another token's session
    assert same_name["status"] == "pending"
    no_session = await submit(papp, bash("npm test -- -u"))
    assert no_session["status"] == "pending"


async def test_who_may_accept_and_where_nothing_is_offered(papp: App) -> None:
    # Separation of duties: the requester may not accept their own suggestion; nothing is written.
    own = await submit(papp, bash("npm test", suggestions=[NPM], requester_user="U1"))
    await tap(papp, own["id"], "U1")
    assert "separation of duties" in await last_note(papp, 1)
    # Not an approver: refused too.
    await tap(papp, own["id"], "U9")
    assert "not one of the approvers" in await last_note(papp, 2)
    _, still = await papp.api("GET", f"/api/v1/approvals/{own['id']}")
    assert still["status"] == "pending"

    # Quorum 2: no suggestion button, the card says why, and a forged tap writes nothing.
    two = await submit(papp, bash("npm test", suggestions=[NPM], quorum=2))
    card = await papp.card(two["id"])
    assert not [a for a in buttons(card) if a.startswith("signoff_suggest_")]
    assert "needs 2 approvals" in notes(card)
    await tap(papp, two["id"], "U1")
    assert "cannot be accepted here" in await last_note(papp, 3)

    # Critical: never offered (and typed confirmation stays the only way to approve).
    critical = await submit(papp, bash("npm test", suggestions=[NPM], risk="critical"))
    card = await papp.card(critical["id"])
    assert not [a for a in buttons(card) if a.startswith("signoff_suggest_")]
    assert "critical requests are never remembered" in notes(card)
    await tap(papp, critical["id"], "U1")
    assert "cannot be accepted here" in await last_note(papp, 4)

    for request_id in (own["id"], two["id"], critical["id"]):
        _, body = await papp.api("GET", f"/api/v1/approvals/{request_id}")
        assert body["status"] == "pending" and body["votes"] == []
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert grants["items"] == []


async def test_without_a_policy_file_suggestions_are_shown_not_offered(app: App) -> None:
    asked = await submit(app, bash("npm test", suggestions=[NPM]))
    card = await app.card(asked["id"])
    assert not [a for a in buttons(card) if a.startswith("signoff_suggest_")]
    assert "policy file" in notes(card)


@pytest.mark.parametrize(("suggestions", "field"), [
    ("always", "suggestions"),
    ([{"rules": []}], "suggestions.0.type"),
    ([{"type": "addRules", "behavior": "allow", "destination": "session"}], "suggestions.0"),
    ([{"type": "addRules", "rules": [{"ruleContent": "x"}], "behavior": "allow"}], "suggestions.0.rules.0.toolName"),
    ([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": 5}], "behavior": "allow"}],
     "suggestions.0.rules.0.ruleContent"),
    ([{"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "maybe"}], "suggestions.0"),
    ([{"type": "setMode"}], "suggestions.0"),
    ([NPM] * 11, "suggestions"),
    ([dict(NPM, rules=[{"toolName": "Bash", "ruleContent": "x" * 1999}] * 10)], "suggestions"),
    (["not an object"], "suggestions.0"),
])
async def test_bad_suggestions_are_a_400_naming_the_field_and_nothing_is_written(
        papp: App, suggestions: Any, field: str) -> None:
    status, body = await papp.api("POST", "/api/v1/approvals", json=bash("npm test", suggestions=suggestions))
    assert status == 400, body
    assert any(d["field"] == field for d in body["error"]["details"]), body
    _, listed = await papp.api("GET", "/api/v1/approvals")
    assert listed["items"] == [] and papp.slack.calls_to("chat.postMessage") == []


async def test_suggestions_belong_to_one_action_and_unknown_kinds_are_accepted(papp: App) -> None:
    items = [{"name": "Bash", "params": {"command": "ls"}}]
    status, body = await papp.api("POST", "/api/v1/approvals",
                                  json={"summary": "two", "items": items, "suggestions": [NPM]})
    assert status == 400 and "a batch cannot have them" in body["error"]["message"]
    status, body = await papp.api("POST", "/api/v1/approvals", json=bash("npm test", session=""))
    assert status == 400 and body["error"]["details"][0]["field"] == "session"
    future = {"type": "addSkills", "skills": ["pdf"], "destination": "session"}
    asked = await submit(papp, bash("npm test", suggestions=[future]))
    assert asked["suggestions"] == [future]
    assert "a addSkills update" in notes(await papp.card(asked["id"]))


async def test_the_readme_curl_example(papp: App) -> None:
    shell = doc_example("suggestions-curl")
    body = json.loads(re.search(r"-d '(.*)'", shell, re.S).group(1))  # type: ignore[union-attr]
    asked = await submit(papp, {**body, "channel": "C1", "approvers": ["U1"]})
    assert asked["suggestions"] == body["suggestions"]
    card = await papp.card(asked["id"])
    assert buttons(card)["signoff_suggest_0"] == "Approve & always allow Bash(npm test *)"
    assert "for this agent (token-1), until revoked" in notes(card)  # its token, not its requested_by


async def test_approve_and_remember_respects_duties_and_typed_confirmation_too(papp: App) -> None:
    own = await submit(papp, bash("npm test", requester_user="U1"))
    assert "signoff_remember" in buttons(await papp.card(own["id"]))
    await papp.click(own["id"], "U1", action="signoff_remember", user_name="alice")
    assert "separation of duties" in await last_note(papp, 1)
    assert papp.slack.calls_to("views.open") == []  # no modal that could approve it

    typed = await submit(papp, bash("npm test", confirm="DEPLOY"))
    card = await papp.card(typed["id"])
    assert "signoff_remember" not in buttons(card)
    await papp.click(typed["id"], "U1", action="signoff_remember", user_name="alice")
    assert "cannot be remembered" in await last_note(papp, 2)
    for request_id in (own["id"], typed["id"]):
        _, body = await papp.api("GET", f"/api/v1/approvals/{request_id}")
        assert body["status"] == "pending"
    _, grants = await papp.api("GET", "/api/v1/grants")
    assert grants["items"] == []
