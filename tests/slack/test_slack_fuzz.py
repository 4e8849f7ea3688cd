"""Property: any validly signed Slack payload, of every type the bot handles, is answered without a 5xx
and crashes no listener (nothing logged at ERROR), whatever its fields hold."""

from __future__ import annotations

import pytest

import asyncio
import json
from typing import Any
from urllib.parse import urlencode

from hypothesis import given
from hypothesis import strategies as st

from tests.support.fuzz import FUZZ_SETTINGS, ErrorLog, in_thread
from tests.api.test_api_fuzz import json_values
from tests.support.app import App
from tests.support.outbox import listeners_done

pytestmark = pytest.mark.fuzz

ACTIONS = ["signoff_approve", "signoff_approve_confirm", "signoff_reject", "signoff_edit", "signoff_snooze", "signoff_escalate",
           "signoff_run_cancel", "signoff_answer_submit", "signoff_answer_0_1", "signoff_pick_0", "other"]
VIEWS = ["signoff_reject", "signoff_edit", "signoff_escalate_view", "other"]
FORM = "application/x-www-form-urlencoded"


def bases(request_id: str, card_ts: str) -> dict[str, dict[str, Any]]:
    user = {"id": "U1", "username": "alice", "name": "alice", "team_id": "T1"}
    meta = json.dumps({"request_id": request_id, "version": 2, "channel": "C1", "message_ts": card_ts})
    view = {"id": "V1", "type": "modal", "callback_id": "signoff_reject", "hash": "h", "private_metadata": meta,
            "state": {"values": {"reason": {"value": {"type": "plain_text_input", "value": "no"}},
                                 "target": {"value": {"type": "static_select", "selected_option": {"value": "next"}}},
                                 "p:to": {"value": {"type": "plain_text_input", "value": "x@example.com"}}}}}
    return {
        "block_actions": {"type": "block_actions", "user": user, "team": {"id": "T1"}, "api_app_id": "A1",
                          "trigger_id": "1.2.3", "channel": {"id": "C1"},
                          "container": {"type": "message", "channel_id": "C1", "message_ts": card_ts},
                          "message": {"ts": card_ts}, "state": {"values": {}},
                          "actions": [{"action_id": "signoff_approve", "block_id": "decide", "value": request_id,
                                       "type": "button"}]},
        "view_submission": {"type": "view_submission", "user": user, "team": {"id": "T1"}, "api_app_id": "A1",
                            "trigger_id": "1.2.3", "view": view, "response_urls": []},
        "view_closed": {"type": "view_closed", "user": user, "team": {"id": "T1"}, "view": view},
        "event_callback": {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "Ev1",
                           "event": {"type": "message", "channel": "C1", "user": "U1", "text": "hi",
                                     "ts": "1700000000.000200", "thread_ts": card_ts, "channel_type": "channel"}},
        "command": {"command": "/signoff", "text": "help", "user_id": "U1", "user_name": "alice",
                    "channel_id": "C1", "team_id": "T1", "trigger_id": "1.2.3",
                    "response_url": "http://127.0.0.1:9/r"},
        "url_verification": {"type": "url_verification", "token": "t", "challenge": "abc"},
    }


def edits(kind: str) -> st.SearchStrategy[list[tuple[list[str], Any]]]:
    paths = {
        "block_actions": [["user"], ["user", "id"], ["actions"], ["actions", "0", "action_id"],
                          ["actions", "0", "value"], ["channel"], ["container"], ["message"], ["state", "values"],
                          ["trigger_id"]],
        "view_submission": [["user"], ["view"], ["view", "private_metadata"], ["view", "callback_id"],
                            ["view", "state"], ["view", "state", "values"], ["view", "state", "values", "reason"],
                            ["view", "state", "values", "target", "value"]],
        "view_closed": [["user"], ["view"], ["view", "callback_id"]],
        "event_callback": [["event"], ["event", "type"], ["event", "user"], ["event", "text"], ["event", "ts"],
                           ["event", "thread_ts"], ["event", "channel"], ["event", "subtype"], ["event_id"]],
        "command": [["text"], ["user_id"], ["channel_id"], ["command"]],
        "url_verification": [["challenge"], ["type"]],
    }[kind]
    special = {
        ("actions", "0", "action_id"): st.sampled_from(ACTIONS),
        ("view", "callback_id"): st.sampled_from(VIEWS),
        ("text",): st.sampled_from(["help", "run", "run do it", "list", "", "grants", "run " + "x" * 50]),
        ("event", "type"): st.sampled_from(["message", "app_home_opened", "app_mention", "reaction_added"]),
    }
    edit = st.sampled_from(paths).flatmap(
        lambda p: st.tuples(st.just(p), special.get(tuple(p), json_values)))
    return st.lists(edit, max_size=3)


def apply(base: dict[str, Any], changes: list[tuple[list[str], Any]]) -> dict[str, Any]:
    body = json.loads(json.dumps(base))
    for path, value in changes:
        target: Any = body
        for part in path[:-1]:
            target = target[int(part)] if isinstance(target, list) and part.isdigit() and int(part) < len(target) \
                else (target.get(part) if isinstance(target, dict) else None)
            if not isinstance(target, dict | list):
                break
        else:
            last = path[-1]
            if isinstance(target, dict):
                target[last] = value
            elif isinstance(target, list) and last.isdigit() and int(last) < len(target):
                target[int(last)] = value
    return body


async def send(app: App, kind: str, body: dict[str, Any]) -> int:
    if kind == "command":
        raw = urlencode({k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()})
        response = await app.slack_client.post_raw(raw, content_type=FORM)
    elif kind in ("event_callback", "url_verification"):
        response = await app.slack_client.post_raw(json.dumps(body), content_type="application/json")
    else:
        response = await app.slack_client.post_raw(urlencode({"payload": json.dumps(body)}), content_type=FORM)
    return response.status


async def test_signed_slack_payloads_never_500_or_crash_a_listener(app: App) -> None:
    req = await app.submit(approvers=["U1", "U2"])
    card = await app.card(req["id"])
    base = bases(req["id"], card.ts)
    loop = asyncio.get_running_loop()
    seen: dict[tuple[str, int], int] = {}

    @FUZZ_SETTINGS
    @given(kind=st.sampled_from(sorted(base)), data=st.data())
    def check(call: Any, kind: str, data: st.DataObject) -> None:
        body = apply(base[kind], data.draw(edits(kind)))
        status = call(send(app, kind, body))
        seen[(kind, status)] = seen.get((kind, status), 0) + 1
        assert status < 500, (kind, body)
        call(listeners_done(app))

    with ErrorLog() as errors:
        await in_thread(loop, lambda call: check(call))
        await listeners_done(app)
        assert app.signoff is not None
        await app.signoff.dispatcher.drain()
        assert errors.take() == []
    print(f"\nSlack fuzz: {sum(seen.values())} payloads, answers: {dict(sorted(seen.items()))}")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}")
    assert body["status"] in ("pending", "approved", "rejected")
