"""Hostile input (issue 9, defects 3 and 10): a clear 4xx (or for Slack an ack), nothing written, no stall."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from tests.support.app import API_TOKEN, App, approval_body

pytestmark = pytest.mark.security

APPROVALS = "/api/v1/approvals"
EVIL = "^(a+)+$"


async def nothing_written(app: App) -> None:
    assert app.signoff is not None
    store = app.signoff.store
    assert await store.list_requests(status=None, limit=10) == []
    assert await store.outbox_items() == []


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_text(depth: int) -> str:
    """JSON text nested `depth` objects deep (json.dumps itself would stop near 1000)."""
    return '{"a":' * depth + "1" + "}" * depth


def deep_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


async def test_a_catastrophic_pattern_never_stalls_the_event_loop(app: App) -> None:
    """`^(a+)+$` against 40 a's and a '!' would backtrack for days on Python's re; on RE2 it is
    instant, and /healthz answers meanwhile. (A generous bound, not a timing assertion: the old code
    would not finish at all.)"""
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": EVIL}}}
    body = approval_body(action={"name": "t", "params": {"x": "a" * 40 + "!"}, "params_schema": schema})
    submit = asyncio.create_task(app.api("POST", APPROVALS, json=body))
    status, health = await asyncio.wait_for(app.api("GET", "/healthz", auth=False), 30)
    assert status == 200 and health == {"status": "ok"}
    status, answer = await asyncio.wait_for(submit, 30)
    assert status == 400 and "must match the pattern" in answer["error"]["message"]
    # patternProperties and additionalProperties consult the patterns too.
    schema = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}, "additionalProperties": False}
    body = approval_body(action={"name": "t", "params": {"a" * 40 + "!": 1}, "params_schema": schema})
    status, answer = await asyncio.wait_for(app.api("POST", APPROVALS, json=body), 30)
    assert status == 400 and "not an allowed field" in answer["error"]["message"], answer
    await nothing_written(app)


@pytest.mark.parametrize(("schema", "words"), [
    ({"type": "object", "properties": {"x": {"type": "string", "pattern": "(a)\\1"}}}, "not supported"),
    ({"type": "object", "properties": {"x": {"type": "string", "pattern": "(?=a)a"}}}, "not supported"),
    ({"type": "object", "properties": {"x": {"type": "string", "pattern": "a" * 1001}}}, "longer than"),
    ({"type": "object", "patternProperties": {"^x": {}}, "unevaluatedProperties": False}, "unevaluatedProperties"),
])
async def test_patterns_re2_cannot_run_are_a_clear_400(app: App, schema: dict[str, Any], words: str) -> None:
    body = approval_body(action={"name": "t", "params": {}, "params_schema": schema})
    status, answer = await app.api("POST", APPROVALS, json=body)
    assert status == 400 and words in answer["error"]["message"], answer
    assert answer["error"]["details"][0]["field"] == "action.params_schema"
    await nothing_written(app)


async def test_a_good_pattern_still_validates(app: App) -> None:
    schema = {"type": "object", "properties": {"to": {"type": "string", "pattern": "^[^@]+@example\\.com$"}}}
    ok = approval_body(action={"name": "t", "params": {"to": "a@example.com"}, "params_schema": schema})
    assert (await app.api("POST", APPROVALS, json=ok))[0] == 201
    bad = approval_body(action={"name": "t", "params": {"to": "a@evil.com"}, "params_schema": schema})
    assert (await app.api("POST", APPROVALS, json=bad))[0] == 400


@pytest.mark.parametrize(("name", "action", "field"), [
    ("params_schema 100 deep", {"name": "t", "params": {}, "params_schema": deep_schema(100)},
     "action.params_schema"),
    ("params 256 deep", {"name": "t", "params": nested(256, 1)}, "action.params"),
    ("params 990 deep", {"name": "t", "params": "DEEP"}, "body"),  # the JSON parser's own limit
])
async def test_deep_nesting_is_a_400_naming_the_field(app: App, name: str, action: Any, field: str) -> None:
    raw = json.dumps(approval_body(action=action)).replace('"DEEP"', deep_text(990))
    status, answer = await app.api("POST", APPROVALS, data=raw, headers={"Content-Type": "application/json"})
    assert status == 400, (name, answer)
    assert "nested" in answer["error"]["message"], answer
    assert answer["error"]["details"][0]["field"] == field
    await nothing_written(app)


async def test_deep_params_on_a_run_or_question_are_refused_too(app: App) -> None:
    status, answer = await app.api("POST", "/api/v1/questions", data=deep_text(5000),
                                   headers={"Content-Type": "application/json"})
    assert status == 400 and "nested" in answer["error"]["message"]


async def test_a_non_utf8_authorization_header_is_a_401(app: App) -> None:
    reader, writer = await asyncio.open_connection(*app.url.removeprefix("http://").split(":"))
    try:
        writer.write(b"GET /api/v1/approvals HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\xfa\r\n"
                     b"Connection: close\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 401"), head[:200]
    # and a valid token still works
    async with aiohttp.ClientSession() as session:
        async with session.get(app.url + APPROVALS, headers={"Authorization": f"Bearer {API_TOKEN}"}) as resp:
            assert resp.status == 200


async def _modal_payload(app: App, request_id: str) -> dict[str, Any]:
    await app.click(request_id, "U1", action="signoff_reject", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    view = opened.args["view"]
    return {
        "type": "view_submission", "team": {"id": "T1", "domain": "t"},
        "user": {"id": "U1", "username": "alice", "name": "alice", "team_id": "T1"},
        "api_app_id": "A1", "token": "x", "trigger_id": "1.2.3",
        "view": {"id": "V1", "type": "modal", "callback_id": view["callback_id"], "hash": "h",
                 "private_metadata": view["private_metadata"],
                 "state": {"values": {"reason": {"value": {"type": "plain_text_input", "value": "no"}}}}},
        "response_urls": [],
    }


@pytest.mark.parametrize("mutation", ["string user", "list state values", "list block", "no view",
                                      "number metadata"])
async def test_signed_but_malformed_view_submission_is_acked_and_writes_nothing(app: App, mutation: str) -> None:
    req = await app.submit()
    payload = await _modal_payload(app, req["id"])
    if mutation == "string user":
        payload["user"] = "U1"
    elif mutation == "list state values":
        payload["view"]["state"]["values"] = [1, 2]
    elif mutation == "list block":
        payload["view"]["state"]["values"] = {"reason": ["x"]}
    elif mutation == "no view":
        payload["view"] = "V1"
    else:
        payload["view"]["private_metadata"] = 7
    body = urlencode({"payload": json.dumps(payload)})
    response = await app.slack_client.post_raw(body, content_type="application/x-www-form-urlencoded")
    assert response.status < 500, (mutation, response.status, response.text)
    assert app.signoff is not None
    await asyncio.wait_for(asyncio.gather(*app.signoff.background, return_exceptions=True), 10)
    _, current = await app.api("GET", f"{APPROVALS}/{req['id']}")
    assert current["status"] == "pending"
