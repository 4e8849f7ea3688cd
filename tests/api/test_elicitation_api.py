"""An MCP elicitation asked in Slack, over HTTP: Claude Code's Elicitation hook at POST
/api/v1/hooks/claude-code and POST /api/v1/elicitations; answered with signed Slack requests
through the emulator (the form built from the schema, checked against it), declined, or left to time out."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from slack_sdk.models.views import View

from bot.sandbox.signed import checkboxes, multi_static_select, number_input, plain_input, static_select
from tests.client.helpers import pending_id
from tests.support.app import App

HOOK = "/api/v1/hooks/claude-code"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "environment": {"type": "string", "title": "Environment", "enum": ["staging", "production"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 20},
        "ratio": {"type": "number"},
        "confirm": {"type": "boolean"},
        "contact": {"type": "string", "format": "email"},
    },
    "required": ["environment", "replicas"],
}


def elicitation(**extra: Any) -> dict[str, Any]:
    return {"session_id": "sess-elicit", "cwd": "/work", "hook_event_name": "Elicitation",
            "mcp_server_name": "deployer", "message": "Where should I deploy build 42?", "mode": "form",
            "requested_schema": SCHEMA, **extra}


def form(**fields: Any) -> dict[str, Any]:
    return {f"f:{name}": {"value": value} for name, value in fields.items()}


async def open_form(app: App, request_id: str, user: str = "U1") -> dict[str, Any]:
    before = len(app.slack.calls_to("views.open"))
    await app.click(request_id, user, action="signoff_elicit_open", user_name="alice")
    opened = await app.slack.wait_for("views.open", count=before + 1)
    return dict(opened[-1].args["view"])


async def test_the_form_answered_in_slack_is_accept_with_content_typed_by_the_schema(app: App) -> None:
    hook = asyncio.create_task(app.api("POST", HOOK + "?wait=30&channel=C1&approvers=U1", json=elicitation()))
    request_id = await pending_id(app)
    card = await app.card(request_id)
    shown = json.dumps(card.blocks)
    assert "Where should I deploy build 42?" in shown and "deployer" in shown and "Environment" in shown

    view = await open_form(app, request_id)
    View(**view)  # slack_sdk's own validation of the modal
    blocks = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert blocks["f:environment"]["element"]["type"] == "static_select"
    assert blocks["f:replicas"]["element"]["type"] == "number_input"
    assert blocks["f:replicas"]["element"]["is_decimal_allowed"] is False
    assert blocks["f:confirm"]["element"]["type"] == "checkboxes"
    assert blocks["f:contact"]["element"]["type"] == "email_text_input"
    assert blocks["f:contact"]["optional"] is True and blocks["f:environment"]["optional"] is False

    meta = view["private_metadata"]
    # Out of the schema's range and not a whole number: the form says so, nothing is decided.
    for bad, field in [("50", "f:replicas"), ("2.5", "f:replicas")]:
        response = await app.slack_client.view_submission(
            user="U1", user_name="alice", callback_id="signoff_elicit_form", private_metadata=meta,
            values=form(environment=static_select("staging"), replicas=number_input(bad)))
        errors = response.json()
        assert errors["response_action"] == "errors" and field in errors["errors"], errors
    assert not hook.done()

    response = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_elicit_form", private_metadata=meta,
        values=form(environment=static_select("production"), replicas=number_input("3"),
                    ratio=number_input("0.5"), confirm=checkboxes(["true"]), contact=plain_input(None)))
    assert response.status == 200 and response.text in ("", "{}"), response.text
    status, answer = await hook
    assert status == 200 and answer == {"hookSpecificOutput": {
        "hookEventName": "Elicitation", "action": "accept",
        "content": {"environment": "production", "replicas": 3, "ratio": 0.5, "confirm": True}}}
    _, stored = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert stored["status"] == "answered" and stored["decision"]["decided_by"] == {"id": "U1", "name": "alice"}
    assert stored["kind"] == "question" and stored["action"]["params"]["server"] == "deployer"


async def test_a_decline_is_decline_and_only_the_people_asked_may_answer(app: App) -> None:
    hook = asyncio.create_task(app.api("POST", HOOK + "?wait=30&channel=C1&approvers=U1", json=elicitation()))
    request_id = await pending_id(app)
    await app.click(request_id, "U9", action="signoff_elicit_decline", user_name="mallory")
    [told] = await app.slack.wait_for("chat.postEphemeral")
    assert "not one of the people asked" in told.args["text"] and not hook.done()
    await app.click(request_id, "U1", action="signoff_elicit_decline", user_name="alice")
    status, answer = await hook
    assert answer == {"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "decline"}}
    _, stored = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert stored["status"] == "rejected" and stored["decision"]["decided_by"]["id"] == "U1"


async def test_nobody_answering_in_time_is_cancel_and_the_card_closes(app: App) -> None:
    status, answer = await app.api("POST", HOOK + "?wait=0.3&channel=C1", json=elicitation())
    out = answer["hookSpecificOutput"]
    assert status == 200 and out == {"hookEventName": "Elicitation", "action": "cancel"}
    assert "nobody answered" in answer["systemMessage"]
    _, listing = await app.api("GET", "/api/v1/approvals")
    [request] = listing["items"]
    assert request["status"] == "cancelled"
    await app.click(request["id"], "U1", action="signoff_elicit_open", user_name="alice")
    [told] = await app.slack.wait_for("chat.postEphemeral")
    assert "cancelled" in told.args["text"]
    assert app.slack.calls_to("views.open") == []


async def test_url_mode_shows_the_link_and_done_is_accept(app: App) -> None:
    body = elicitation(mode="url", url="https://auth.example.com/login?x=1&y=2", elicitation_id="el-1")
    del body["requested_schema"]
    hook = asyncio.create_task(app.api("POST", HOOK + "?wait=30&channel=C1", json=body))
    request_id = await pending_id(app)
    card = await app.card(request_id)
    shown = json.dumps(card.blocks)
    assert "https://auth.example.com/login?x=1&amp;y=2" in shown and "not from Signoff" in shown
    await app.click(request_id, "U1", action="signoff_elicit_done", user_name="alice")
    _, answer = await hook
    assert answer == {"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept"}}


async def test_garbled_input_and_schemas_that_cannot_be_shown_are_cancel_with_the_reason(app: App) -> None:
    nested = {"type": "object", "properties": {"owner": {"type": "object", "properties": {}}}}
    for body, expected in [
        ({"hook_event_name": "Elicitation", "session_id": "s"}, "mcp_server_name: Field required"),
        (elicitation(mode="sideways"), "mode: must be form or url"),
        (elicitation(requested_schema=nested), "properties.owner: type 'object' cannot be asked"),
        (elicitation(mode="url", url="javascript:alert(1)"), "url must be an http(s) URL"),
    ]:
        status, answer = await app.api("POST", HOOK + "?wait=1&channel=C1", json=body)
        assert status == 200 and answer["hookSpecificOutput"] == {"hookEventName": "Elicitation", "action": "cancel"}
        assert expected in answer["systemMessage"], (body, answer)
    _, answer = await app.api("POST", HOOK + "?channel=C1", json=elicitation(), auth=False,
                              headers={"Authorization": "Bearer wrong"})
    assert answer["hookSpecificOutput"]["action"] == "cancel" and "bearer token" in answer["systemMessage"]
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert listing["items"] == []  # nothing stored


async def test_the_api_refuses_what_it_cannot_ask_and_honours_the_idempotency_key(app: App) -> None:
    status, refused = await app.api("POST", "/api/v1/elicitations",
                                    json={"message": "Pick", "requested_schema": {"type": "object", "properties": {
                                        "tags": {"type": "array", "items": {"type": "string"}}}}, "channel": "C1"})
    assert status == 400 and "tags: an array can be asked only as a multiple choice" in refused["error"]["message"], refused
    body = {"message": "Which region?", "channel": "C1", "server": "infra",
            "requested_schema": {"type": "object", "properties": {"region": {"type": "string", "oneOf": [
                {"const": "eu", "title": "Europe"}, {"const": "us", "title": "America"}]}}}}
    status, created = await app.api("POST", "/api/v1/elicitations", json=body, headers={"Idempotency-Key": "k1"})
    assert status == 201 and created["status"] == "pending" and created["elicitation"] is None
    status, again = await app.api("POST", "/api/v1/elicitations", json=body, headers={"Idempotency-Key": "k1"})
    assert status == 200 and again["id"] == created["id"]
    view = await open_form(app, created["id"])
    options = view["blocks"][1]["element"]["options"]
    assert [(o["value"], o["text"]["text"]) for o in options] == [("eu", "Europe"), ("us", "America")]
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id="signoff_elicit_form",
                                           private_metadata=view["private_metadata"],
                                           values=form(region=static_select("eu")))
    _, done = await app.api("GET", f"/api/v1/approvals/{created['id']}?wait=5")
    assert done["status"] == "answered" and done["decision"]["params"] == {"content": {"region": "eu"}}


MULTI: dict[str, Any] = {
    "type": "object",
    "properties": {
        "checks": {"type": "array", "title": "Checks to run", "minItems": 1, "maxItems": 2, "default": ["lint"],
                   "items": {"type": "string", "enum": ["lint", "unit", "e2e"]}},
        "regions": {"type": "array", "title": "Regions", "maxItems": 3,
                    "items": {"anyOf": [{"const": f"r{n}", "title": f"Region {n}"} for n in range(12)]}},
        "tier": {"type": "string", "title": "Tier", "oneOf": [{"const": "gold", "title": "Gold (24/7)"},
                                                              {"const": "basic", "title": "Basic"}]},
    },
    "required": ["checks", "tier"],
}


async def test_a_multiple_choice_is_asked_as_a_multi_select_and_answered_as_a_list(app: App) -> None:
    hook = asyncio.create_task(app.api("POST", HOOK + "?wait=30&channel=C1&approvers=U1",
                                       json=elicitation(requested_schema=MULTI)))
    request_id = await pending_id(app)
    shown = json.dumps((await app.card(request_id)).blocks)
    assert "Checks to run: any of lint, unit, e2e (choose 1 to 2)" in shown and "Tier: one of Gold (24/7), Basic" in shown
    view = await open_form(app, request_id)
    View(**view)  # slack_sdk's own validation of the modal
    blocks = {b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert blocks["f:checks"]["type"] == "checkboxes"  # a few options: one tap each
    assert [o["value"] for o in blocks["f:checks"]["initial_options"]] == ["lint"]
    assert blocks["f:regions"]["type"] == "multi_static_select" and blocks["f:regions"]["max_selected_items"] == 3
    assert blocks["f:regions"]["options"][11]["text"]["text"] == "Region 11"
    assert blocks["f:tier"]["type"] == "static_select"
    meta = view["private_metadata"]
    for values, field, said in [
        (form(checks=checkboxes(["lint", "unit", "e2e"]), tier=static_select("gold")), "f:checks", "choose at most 2"),
        (form(checks=checkboxes(["lint"]), regions=multi_static_select(["r1", "r99"]), tier=static_select("gold")),
         "f:regions", "must be one of the options"),
    ]:
        response = await app.slack_client.view_submission(user="U1", user_name="alice", private_metadata=meta,
                                                          callback_id="signoff_elicit_form", values=values)
        errors = response.json()
        assert errors["response_action"] == "errors" and errors["errors"] == {field: said}, errors
    assert not hook.done()

    response = await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_elicit_form", private_metadata=meta,
        values=form(checks=checkboxes(["unit", "lint"]), regions=multi_static_select(["r2", "r11"]),
                    tier=static_select("gold")))
    assert response.status == 200 and response.text in ("", "{}"), response.text
    status, answer = await hook
    assert status == 200 and answer == {"hookSpecificOutput": {
        "hookEventName": "Elicitation", "action": "accept",
        "content": {"checks": ["unit", "lint"], "regions": ["r2", "r11"], "tier": "gold"}}}
    [update] = await app.slack.wait_for("chat.update")  # the card says what was answered, by label
    shown = json.dumps(update.args["blocks"])
    assert "Regions: Region 2, Region 11" in shown and "Tier: Gold (24/7)" in shown


async def test_a_multiple_choice_a_person_could_not_answer_is_refused_with_the_reason(app: App) -> None:
    def asking(prop: dict[str, Any]) -> dict[str, Any]:
        return {"message": "Pick", "channel": "C1", "requested_schema": {"type": "object", "properties": {"p": prop}}}

    options = {"type": "string", "enum": ["a", "b"]}
    for prop, said in [
        ({"type": "array", "items": options, "minItems": 3}, "minItems (3) is more than the 2 options"),
        ({"type": "array", "items": options, "minItems": 2, "maxItems": 1}, "minItems (2) is more than maxItems (1)"),
        ({"type": "array", "items": options, "default": ["c"]}, "default must be a list of the options"),
        ({"type": "array", "items": {"anyOf": [{"const": "a", "title": 3}]}}, "anyOf must be a list of"),
        ({"type": "array", "items": {"type": "integer", "enum": [1]}}, "only as a multiple choice"),
    ]:
        status, refused = await app.api("POST", "/api/v1/elicitations", json=asking(prop))
        assert status == 400 and said in refused["error"]["message"], (prop, refused)
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert listing["items"] == []
