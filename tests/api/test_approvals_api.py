"""The agent API over real HTTP against the running app: auth, validation, idempotency, long-poll,
cancel, listing, signed webhooks with retries, health and metrics. Slack is the fake Web API."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from bot.api.webhooks import verify
from bot.domain.params_hash import params_sha256
from bot.sandbox import SlackEmulator
from tests.support.outbox import drain
from tests.support.app import API_TOKEN, WEBHOOK_SECRET, App, ShiftedClock, approval_body, start_app
from tests.support.waits import long_poll_registered
from tests.support.waits import until

APPROVALS = "/api/v1/approvals"


def store_of(app: App) -> Any:
    assert app.signoff is not None
    return app.signoff.store


async def counts(app: App) -> tuple[int, int, int]:
    """(requests, outbox items, audit events) stored: proof that a refused call wrote nothing."""
    store = store_of(app)
    requests = await store.list_requests(status=None, limit=10_000)
    audit = sum([len(await store.audit_events(r.id)) for r in requests])
    return len(requests), len(await store.outbox_items()), audit


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 5.0) -> None:
    """Test-side wait for a stored state the app reaches in the background (never used by the app)."""
    await until(check, what, timeout=timeout)


@pytest_asyncio.fixture
async def clocked(db_url: str, slack: SlackEmulator) -> AsyncIterator[tuple[App, ShiftedClock]]:
    """The app on a clock the test moves forward, so retries fall due without sleeping."""
    clock = ShiftedClock()
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_WEBHOOK_MAX_ATTEMPTS="3",
                              SIGNOFF_EGRESS_ALLOW="127.0.0.1")  # the receivers listen on loopback
    try:
        yield running, clock
    finally:
        await running.stop()


# -- auth ----------------------------------------------------------------------------------------------


ROUTES = [
    ("POST", APPROVALS),
    ("GET", APPROVALS),
    ("GET", APPROVALS + "/apr_x"),
    ("GET", APPROVALS + "/apr_x?wait=1"),
    ("POST", APPROVALS + "/apr_x/cancel"),
    ("GET", "/api/v1/no-such-route"),
]
BAD_AUTH: list[dict[str, str]] = [
    {},
    {"Authorization": "Bearer wrong-token-123"},
    {"Authorization": f"Bearer {API_TOKEN}x"},
    {"Authorization": f"Bearer {API_TOKEN[:-1]}"},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer "},
    {"Authorization": f"Basic {API_TOKEN}"},
    {"Authorization": API_TOKEN},
    {"Authorization": f"Token {API_TOKEN}"},
    {"Authorization": "Bearer \u00e9\u00e9\u00e9"},
]


async def test_every_route_needs_a_valid_bearer_token(app: App) -> None:
    before = await counts(app)
    for method, path in ROUTES:
        for headers in BAD_AUTH:
            async with app.session.request(method, app.url + path, headers=headers,
                                           json=approval_body() if method == "POST" else None) as resp:
                body = await resp.json()
                where = f"{method} {path} with {headers}"
                assert resp.status == 401, where
                assert resp.headers["WWW-Authenticate"].startswith("Bearer"), where
                assert resp.content_type == "application/json", where
                assert body["error"]["code"] == "unauthorized", where
                assert "bearer" in body["error"]["message"].lower(), where
    assert await counts(app) == before
    # The right token, with the scheme in any case, gets through.
    status, _ = await app.api("GET", APPROVALS, headers={"Authorization": f"bearer {API_TOKEN}"})
    assert status == 200


async def test_unknown_api_route_and_method_are_json(app: App) -> None:
    status, body = await app.api("GET", "/api/v1/no-such-route")
    assert status == 404 and body["error"]["code"] == "not_found"
    status, body = await app.api("DELETE", APPROVALS)
    assert status == 405 and body["error"]["code"] == "method_not_allowed"


# -- create -----------------------------------------------------------------------------------------------


async def test_create_returns_201_location_and_the_request(app: App) -> None:
    params = {"to": "zoë@example.com", "subject": "Grüße ✉️", "amount": 40, "body": "Hi"}
    sent = approval_body(action={"name": "send_email", "params": params})
    async with app.session.post(app.url + APPROVALS, json=sent, headers=app.headers) as resp:
        assert resp.status == 201
        assert resp.content_type == "application/json"
        body = await resp.json()
        location = resp.headers["Location"]
    assert body["id"].startswith("apr_")
    assert location == f"{APPROVALS}/{body['id']}"
    assert body | {"id": None, "created_at": None, "updated_at": None, "timers": None} == {
        "id": None,
        "kind": "approval",
        "status": "pending",
        "action": {"name": "send_email", "params": params, "params_schema": None},
        "summary": sent["summary"],
        "context": sent["context"],
        "preview": {"kind": "email", "to": ["customer@example.com"], "cc": [], "subject": "Your refund",
                    "body": "Hello,\nrefund sent."},
        "risk": "high",
        "channel": "C1",
        "approvers": ["U1", "U2"],
        "callback_url": None,
        "requested_by": "support-agent",
        "idempotency_key": None,  # the body was sent without one
        "created_at": None,
        "updated_at": None,
        "card": None,
        "delivery": {"status": "queued"},
        "decision": None,
        # The server's default timing, since the body gave none.
        "timing": {"reminders": {"every": "1h", "max": 3}, "escalation": None,
                   "timeout": {"after": "1d", "outcome": "expire"}},
        "timers": None,
        # Issue 12: one approver, no requester who is a Slack user, no typed confirmation, no batch.
        "quorum": 1, "requester_may_approve": True, "confirm": None, "requester_user": None, "votes": [],
        "items": None,
        "outcome": None,  # issue 34: what happened when the decided action ran, if it did not succeed
        "outcome_status": None,  # issue 37: "not_reported" once approved and nobody reported what ran
    }
    assert list(body["action"]["params"]) == list(params)  # the agent's order is kept
    assert body["created_at"].endswith("Z") and body["created_at"] == body["updated_at"]
    status, fetched = await app.api("GET", location)
    assert status == 200 and fetched | {"card": None, "delivery": None, "updated_at": None} == body | {
        "delivery": None, "updated_at": None}
    # The card is posted in the requested channel.
    card = await app.card(body["id"])
    assert card.channel == "C1"


async def test_defaults_and_duplicate_approvers(app: App) -> None:
    app.slack.add_usergroup("SOPS", ["U3"])
    sent = {"action": {"name": "deploy"}, "summary": "  Deploy\n  build 42  ", "channel": "C1",
            "approvers": ["U1", "U1", "SOPS"]}
    status, body = await app.api("POST", APPROVALS, json=sent)
    assert status == 201, body
    assert body["risk"] == "high" and body["action"]["params"] == {} and body["preview"] is None
    assert body["summary"] == "Deploy build 42"
    assert body["approvers"] == ["U1", "SOPS"]


async def test_unknown_approver_group_is_refused_and_nothing_stored(app: App) -> None:
    status, body = await app.api("POST", APPROVALS, json=approval_body(approvers=["U1", "SNOSUCH"]))
    assert status == 400
    assert body["error"]["details"] == [{"field": "approvers.1",
                                         "message": "SNOSUCH is not a user group in this Slack workspace"}]
    assert app.signoff is not None
    assert await app.signoff.store.list_requests(status=None, limit=10) == []


def _without(key: str) -> dict[str, Any]:
    body = approval_body()
    del body[key]
    return body


SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer", "maximum": 100}}, "required": ["amount"]}

# (what is wrong, body or raw bytes, words the message must contain)
INVALID: list[tuple[str, Any, list[str]]] = [
    ("missing action", _without("action"), ["action"]),
    ("missing summary", _without("summary"), ["summary"]),
    ("blank summary", approval_body(summary=" \n "), ["summary"]),
    ("missing action name", approval_body(action={"params": {}}), ["action.name"]),
    ("empty action name", approval_body(action={"name": ""}), ["action.name"]),
    ("unknown field", approval_body(priority="urgent"), ["priority", "unknown field"]),
    ("unknown nested field", approval_body(action={"name": "x", "argz": {}}), ["action.argz", "unknown field"]),
    ("bad risk", approval_body(risk="extreme"), ["risk"]),
    ("bad channel id", approval_body(channel="general"), ["channel"]),
    ("channel name, not id", approval_body(channel="#approvals"), ["channel"]),
    ("bad approver id", approval_body(approvers=["U1", "alice"]), ["approvers", "alice"]),
    ("approver not a string", approval_body(approvers=[7]), ["approvers"]),
    ("too many approvers", approval_body(approvers=[f"U{n}" for n in range(51)]), ["approvers"]),
    ("params not an object", approval_body(action={"name": "x", "params": [1, 2]}), ["action.params"]),
    ("params not matching params_schema",
     approval_body(action={"name": "refund", "params": {"amount": 500}, "params_schema": SCHEMA}),
     ["params", "amount", "100"]),
    ("params missing a required field",
     approval_body(action={"name": "refund", "params": {}, "params_schema": SCHEMA}), ["params", "amount"]),
    ("invalid params_schema",
     approval_body(action={"name": "x", "params": {}, "params_schema": {"type": "object",
                                                                     "properties": {"a": {"type": "nope"}}}}),
     ["params_schema"]),
    ("params_schema not for an object",
     approval_body(action={"name": "x", "params": {}, "params_schema": {"type": "array"}}), ["params_schema"]),
    ("params_schema not an object", approval_body(action={"name": "x", "params_schema": "yes"}), ["params_schema"]),
    ("email preview without subject", approval_body(preview={"kind": "email", "to": ["a@b.c"], "body": "x"}),
     ["preview", "subject"]),
    ("email preview with a number for to",
     approval_body(preview={"kind": "email", "to": 5, "subject": "s", "body": "x"}), ["preview", "to"]),
    ("diff preview without content", approval_body(preview={"kind": "diff", "before": "a"}), ["preview", "diff"]),
    ("table preview without columns", approval_body(preview={"kind": "table", "columns": [], "rows": []}),
     ["preview", "columns"]),
    ("table preview with bad rows", approval_body(preview={"kind": "table", "columns": ["a"], "rows": "x"}),
     ["preview", "rows"]),
    ("markdown preview without text", approval_body(preview={"kind": "markdown"}), ["preview", "text"]),
    ("json preview without value", approval_body(preview={"kind": "json"}), ["preview", "value"]),
    ("preview of an unknown kind", approval_body(preview={"kind": "pdf", "url": "x"}), ["preview"]),
    ("preview without kind", approval_body(preview={"text": "x"}), ["preview"]),
    ("preview not an object", approval_body(preview="look at this"), ["preview"]),
    ("preview with an unknown field", approval_body(preview={"kind": "markdown", "text": "x", "html": "<b>"}),
     ["preview", "html"]),
    ("oversize summary", approval_body(summary="s" * 3001), ["summary", "3000"]),
    ("oversize context", approval_body(context="c" * 20001), ["context", "20000"]),
    ("oversize params", approval_body(action={"name": "x", "params": {"blob": "p" * (300 * 1024)}}),
     ["action.params", "KB"]),
    ("oversize preview", approval_body(preview={"kind": "markdown", "text": "m" * (600 * 1024)}), ["preview", "KB"]),
    ("callback_url without http(s)", approval_body(callback_url="ftp://agent.example.com/hook"), ["callback_url"]),
    ("callback_url javascript", approval_body(callback_url="javascript:alert(1)"), ["callback_url"]),
    ("summary not a string", approval_body(summary=["a"]), ["summary"]),
    ("malformed JSON", b'{"action": {"name": "x"}, "summary": ', ["JSON"]),
    ("JSON array body", b'[{"action": {"name": "x"}, "summary": "s"}]', ["JSON object"]),
    ("JSON string body", b'"hello"', ["JSON object"]),
    ("JSON null body", b"null", ["JSON object"]),
    ("empty body", b"", ["action", "summary"]),
    ("whitespace body", b"  \n", ["action", "summary"]),
    ("not UTF-8", b'{"summary": "\xff\xfe"}', ["JSON"]),
    ("NaN is not JSON", b'{"action": {"name": "x", "params": {"n": NaN}}, "summary": "s", "channel": "C1"}',
     ["JSON"]),
    ("Infinity is not JSON", b'{"action": {"name": "x", "params": {"n": -Infinity}}, "summary": "s"}', ["JSON"]),
    ("nesting too deep", b"[" * 100_000 + b"]" * 100_000, ["JSON"]),
    ("lone surrogate", b'{"action": {"name": "x"}, "summary": "bad \\ud800 text", "channel": "C1"}', ["JSON"]),
    ("no channel and no default", _without("channel"), ["channel"]),
]


async def test_every_validation_failure_is_400_naming_the_field_and_writes_nothing(app: App) -> None:
    await app.submit()  # something stored already, so "nothing written" is not trivially true
    await drain(app)
    before = await counts(app)
    for what, body, words in INVALID:
        if isinstance(body, bytes):
            status, answer = await app.api("POST", APPROVALS, data=body,
                                           headers={"Content-Type": "application/json"})
        else:
            status, answer = await app.api("POST", APPROVALS, json=body)
        assert status == 400, (what, answer)
        assert answer["error"]["code"] == "invalid_request", what
        message = answer["error"]["message"]
        assert "\n" not in message, what
        for word in words:
            assert word in message, (what, word, message)
        if not isinstance(body, bytes) or body.strip() in (b"",):
            assert answer["error"]["details"], what
            assert all(set(d) == {"field", "message"} for d in answer["error"]["details"]), what
    await drain(app)
    assert await counts(app) == before
    assert len(app.slack.calls_to("chat.postMessage")) == 1


async def test_bad_idempotency_key_is_refused(app: App) -> None:
    status, answer = await app.api("POST", APPROVALS, json=approval_body(), headers={"Idempotency-Key": "k" * 256})
    assert status == 400 and "Idempotency-Key" in answer["error"]["message"]
    assert await counts(app) == (0, 0, 0)


async def test_body_over_one_mebibyte_is_413_json(app: App) -> None:
    big = json.dumps(approval_body(context="c" * (1024 * 1024 + 10))).encode()
    status, answer = await app.api("POST", APPROVALS, data=io.BytesIO(big),
                                   headers={"Content-Type": "application/json"})
    assert status == 413, answer
    assert answer["error"]["code"] == "body_too_large"
    assert str(1024 * 1024) in answer["error"]["message"]
    assert await counts(app) == (0, 0, 0)


# -- idempotency ---------------------------------------------------------------------------------------


async def test_same_key_same_body_returns_the_first_request_and_posts_one_card(app: App) -> None:
    headers = {"Idempotency-Key": "agent-run-7:step-3"}
    status1, first = await app.api("POST", APPROVALS, json=approval_body(), headers=headers)
    await drain(app)
    status2, second = await app.api("POST", APPROVALS, json=approval_body(), headers=headers)
    await drain(app)
    assert (status1, status2) == (201, 200)
    assert second["id"] == first["id"]
    assert second["card"] is not None  # the stored request, as it is now
    assert len(app.slack.calls_to("chat.postMessage")) == 1
    assert (await counts(app))[0] == 1
    # The same key after a decision still answers with the (now decided) request.
    await app.click(first["id"], "U1")
    _, decided = await app.api("GET", f"{APPROVALS}/{first['id']}?wait=5")
    status3, third = await app.api("POST", APPROVALS, json=approval_body(), headers=headers)
    assert status3 == 200 and third["id"] == first["id"] and third["status"] == decided["status"] == "approved"


async def test_same_key_different_body_is_409_and_writes_nothing(app: App) -> None:
    headers = {"Idempotency-Key": "k-1"}
    status, first = await app.api("POST", APPROVALS, json=approval_body(), headers=headers)
    assert status == 201
    await drain(app)
    before = await counts(app)
    status, answer = await app.api("POST", APPROVALS, json=approval_body(summary="Something else"),
                                   headers=headers)
    assert status == 409
    assert answer["error"]["code"] == "idempotency_key_reused"
    assert first["id"] in answer["error"]["message"]
    await drain(app)
    assert await counts(app) == before
    # Another key is another request.
    status, other = await app.api("POST", APPROVALS, json=approval_body(), headers={"Idempotency-Key": "k-2"})
    assert status == 201 and other["id"] != first["id"]


async def test_twenty_concurrent_identical_requests_with_one_key_make_one_request(app: App) -> None:
    headers = {"Idempotency-Key": "burst-1"}
    results = await asyncio.gather(*(app.api("POST", APPROVALS, json=approval_body(), headers=headers)
                                     for _ in range(20)))
    statuses = sorted(status for status, _ in results)
    assert statuses == [200] * 19 + [201], results
    assert len({body["id"] for _, body in results}) == 1
    await drain(app)
    assert (await counts(app))[0] == 1
    assert len(app.slack.calls_to("chat.postMessage")) == 1


# -- read and long-poll ------------------------------------------------------------------------------------


async def test_get_unknown_request_is_404_json(app: App) -> None:
    for path in (f"{APPROVALS}/apr_nope", f"{APPROVALS}/apr_nope?wait=1", f"{APPROVALS}/%27%3B--"):
        status, body = await app.api("GET", path)
        assert status == 404, path
        assert body["error"]["code"] == "not_found"
    status, body = await app.api("POST", f"{APPROVALS}/apr_nope/cancel")
    assert status == 404 and body["error"]["code"] == "not_found"


async def test_bad_wait_values_are_400(app: App) -> None:
    req = await app.submit()
    for value in ("-1", "61", "abc", "nan", "inf", "", "1e9"):
        status, body = await app.api("GET", f"{APPROVALS}/{req['id']}?wait={value}")
        assert status == 400, value
        assert "wait" in body["error"]["message"], value


async def test_wait_returns_a_decided_request_at_once_and_a_pending_one_after_the_wait(app: App) -> None:
    decided = await app.submit()
    await app.click(decided["id"], "U1", user_name="alice")
    _, first = await app.api("GET", f"{APPROVALS}/{decided['id']}?wait=5")
    assert first["status"] == "approved"
    status, body = await app.api("GET", f"{APPROVALS}/{decided['id']}?wait=60")
    assert status == 200 and body["status"] == "approved"
    assert body["decision"]["outcome"] == "approved" and body["decision"]["decided_by"]["id"] == "U1"

    pending = await app.submit(summary="Nobody answers this one")
    status, body = await app.api("GET", f"{APPROVALS}/{pending['id']}?wait=0.2")
    assert status == 200 and body["status"] == "pending" and body["decision"] is None
    status, body = await app.api("GET", f"{APPROVALS}/{pending['id']}?wait=0")
    assert status == 200 and body["status"] == "pending"


async def test_waiting_poll_is_woken_by_a_cancel(app: App) -> None:
    req = await app.submit()
    waiter = asyncio.create_task(app.api("GET", f"{APPROVALS}/{req['id']}?wait=30"))
    await long_poll_registered(app.url)  # a cancel that wakes a registered poll is what this tests
    status, _ = await app.api("POST", f"{APPROVALS}/{req['id']}/cancel", json={"reason": "user left"})
    assert status == 200
    status, body = await asyncio.wait_for(waiter, 10)
    assert status == 200 and body["status"] == "cancelled"


async def test_a_woken_long_poll_answers_what_a_read_returns(app: App) -> None:
    """The waiter is handed the decided request in memory (no read back): it must be exactly what a
    read returns, for a click (the decider, the version, the card) and for a cancel."""
    for decide in ("click", "cancel"):
        req = await app.submit()
        await app.card(req["id"])
        waiter = asyncio.create_task(app.api("GET", f"{APPROVALS}/{req['id']}?wait=30"))
        await long_poll_registered(app.url)
        if decide == "click":
            await app.click(req["id"], "U2", user_name="bob")
        else:
            await app.api("POST", f"{APPROVALS}/{req['id']}/cancel", json={"reason": "plan changed"})
        status, woken = await asyncio.wait_for(waiter, 10)
        _, read = await app.api("GET", f"{APPROVALS}/{req['id']}")
        assert status == 200 and woken["status"] in ("approved", "cancelled")
        assert woken == read


# -- cancel --------------------------------------------------------------------------------------------------


async def test_cancel_then_cancel_again(app: App) -> None:
    req = await app.submit()
    await app.card(req["id"])
    status, body = await app.api("POST", f"{APPROVALS}/{req['id']}/cancel", json={"reason": "plan changed"})
    assert status == 200
    assert body["status"] == "cancelled"
    assert body["decision"] | {"decided_at": None} == {
        "outcome": "cancelled", "params": req["action"]["params"], "changes": [], "comment": "plan changed",
        "decided_by": None, "decided_at": None, "via": "api",
        "params_sha256": params_sha256(req["action"]["params"]), "votes": [], "items": None,
    }
    status, again = await app.api("POST", f"{APPROVALS}/{req['id']}/cancel")
    assert status == 409
    assert again["error"]["code"] == "not_pending"
    assert again["request"]["id"] == req["id"] and again["request"]["status"] == "cancelled"
    assert again["request"]["decision"]["comment"] == "plan changed"
    # The card shows it and has no buttons left.
    await drain(app)
    [update] = app.slack.calls_to("chat.update", ok_only=True)
    assert not any(b["type"] == "actions" for b in update.args["blocks"])
    audit = [e.type for e in await store_of(app).audit_events(req["id"])]
    assert audit.count("decided") == 1


async def test_cancel_after_a_click_is_409_with_the_winner(app: App) -> None:
    req = await app.submit()
    await app.click(req["id"], "U2", user_name="bob")
    await app.api("GET", f"{APPROVALS}/{req['id']}?wait=5")
    status, body = await app.api("POST", f"{APPROVALS}/{req['id']}/cancel", json={})
    assert status == 409 and body["request"]["decision"]["decided_by"] == {"id": "U2", "name": "bob"}


async def test_cancel_with_a_bad_body_is_400(app: App) -> None:
    req = await app.submit()
    for raw in (b'{"why": "x"}', b"[1]", b"{", json.dumps({"reason": "r" * 2001}).encode()):
        status, body = await app.api("POST", f"{APPROVALS}/{req['id']}/cancel", data=raw,
                                     headers={"Content-Type": "application/json"})
        assert status == 400, raw
    _, body = await app.api("GET", f"{APPROVALS}/{req['id']}")
    assert body["status"] == "pending"


# -- list ------------------------------------------------------------------------------------------------------


async def test_list_filters_and_paginates(app: App) -> None:
    created = [await app.submit(summary=f"Request {n}") for n in range(5)]
    ids = [r["id"] for r in created]
    for request_id in ids[1::2]:
        status, _ = await app.api("POST", f"{APPROVALS}/{request_id}/cancel")
        assert status == 200

    status, page = await app.api("GET", APPROVALS)
    assert status == 200 and [r["id"] for r in page["items"]] == ids and page["next_cursor"] is None
    _, pending = await app.api("GET", f"{APPROVALS}?status=pending")
    assert [r["id"] for r in pending["items"]] == ids[0::2]
    _, cancelled = await app.api("GET", f"{APPROVALS}?status=cancelled")
    assert [r["id"] for r in cancelled["items"]] == ids[1::2]
    assert all(r["status"] == "cancelled" for r in cancelled["items"])
    _, none = await app.api("GET", f"{APPROVALS}?status=approved")
    assert none == {"items": [], "next_cursor": None}

    pages, cursor = [], None
    while True:
        path = f"{APPROVALS}?limit=2" + (f"&cursor={cursor}" if cursor else "")
        status, page = await app.api("GET", path)
        assert status == 200, page
        pages.append([r["id"] for r in page["items"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [ids[0:2], ids[2:4], ids[4:5]]

    _, first = await app.api("GET", f"{APPROVALS}?status=pending&limit=2")
    _, rest = await app.api("GET", f"{APPROVALS}?status=pending&limit=2&cursor={first['next_cursor']}")
    assert [r["id"] for r in first["items"] + rest["items"]] == ids[0::2] and rest["next_cursor"] is None


async def test_list_refuses_bad_parameters(app: App) -> None:
    for query, word in [("status=done", "status"), ("status=PENDING", "status"), ("cursor=%21%21%21", "cursor"),
                        ("cursor=e30", "cursor"), ("cursor=WyJ4IiwgMV0", "cursor"),
                        ("cursor=WyIyMDI2LTAxLTAxVDAwOjAwOjAwIiwgImFwcl94Il0", "cursor"),  # a naive time
                        ("limit=0", "limit"), ("limit=201", "limit"), ("limit=abc", "limit")]:
        status, body = await app.api("GET", f"{APPROVALS}?{query}")
        assert status == 400, (query, body)
        assert body["error"]["code"] == "invalid_request" and word in body["error"]["message"], query


# -- webhooks ----------------------------------------------------------------------------------------------


class Receiver:
    """A webhook receiver on 127.0.0.1 answering with `statuses` in turn (then the last one forever)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/hook"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _hook(self, request: web.Request) -> web.Response:
        self.deliveries.append((dict(request.headers), await request.read()))
        status = self.statuses[min(len(self.deliveries), len(self.statuses)) - 1]
        self._changed.set()
        return web.json_response({"ok": status < 300}, status=status)

    async def wait_for(self, count: int, timeout: float = 5.0) -> None:
        async def reached() -> None:
            while len(self.deliveries) < count:
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(reached(), timeout)
        except TimeoutError:
            raise AssertionError(f"receiver got {len(self.deliveries)} deliveries, expected {count}") from None


def check_signed(headers: dict[str, str], raw: bytes) -> dict[str, Any]:
    assert verify(WEBHOOK_SECRET, headers["X-Signoff-Timestamp"], raw, headers["X-Signoff-Signature"])
    assert not verify("another-secret", headers["X-Signoff-Timestamp"], raw, headers["X-Signoff-Signature"])
    assert not verify(WEBHOOK_SECRET, headers["X-Signoff-Timestamp"], raw + b" ", headers["X-Signoff-Signature"])
    assert headers["Content-Type"].startswith("application/json")
    return json.loads(raw)


async def webhook_item(app: App, request_id: str) -> Any:
    [item] = [i for i in await store_of(app).outbox_items(request_id) if i.kind == "webhook"]
    return item


@pytest_asyncio.fixture
async def loopback_hooks(db_url: str, slack: FakeSlack) -> AsyncIterator[App]:
    """The app with loopback opened to webhooks (SIGNOFF_EGRESS_ALLOW): the test receivers listen there."""
    running = await start_app(db_url, slack, SIGNOFF_EGRESS_ALLOW="127.0.0.1")
    try:
        yield running
    finally:
        await running.stop()


async def test_webhook_is_signed_and_delivered_once(loopback_hooks: App) -> None:
    app = loopback_hooks
    async with Receiver([200]) as receiver:
        req = await app.submit(callback_url=receiver.url)
        assert req["callback_url"] == receiver.url
        await app.click(req["id"], "U1", user_name="alice")
        await receiver.wait_for(1)
        await drain(app)
        await eventually(lambda: _item_status(app, req["id"], "done"), "the webhook to be marked done")
        await drain(app)
        assert len(receiver.deliveries) == 1
    headers, raw = receiver.deliveries[0]
    body = check_signed(headers, raw)
    assert headers["X-Signoff-Delivery"] == f"webhook:{req['id']}:decided"
    assert body["type"] == "approval.decided"
    assert body["request"]["id"] == req["id"] and body["request"]["status"] == "approved"
    assert body["request"]["decision"] | {"decided_at": None, "votes": None} == {
        "outcome": "approved", "params": req["action"]["params"], "changes": [], "comment": None,
        "decided_by": {"id": "U1", "name": "alice"}, "decided_at": None, "via": "button",
        "params_sha256": params_sha256(req["action"]["params"]), "votes": None, "items": None,
    }
    assert [(v["id"], v["name"]) for v in body["request"]["decision"]["votes"]] == [("U1", "alice")]
    _, current = await app.api("GET", f"{APPROVALS}/{req['id']}")
    assert body["request"]["decision"] == current["decision"]
    types = [e.type for e in await store_of(app).audit_events(req["id"])]
    assert types.count("webhook_delivered") == 1


async def _item_status(app: App, request_id: str, status: str) -> bool:
    return (await webhook_item(app, request_id)).status == status


async def test_webhook_retried_until_the_receiver_answers(clocked: tuple[App, ShiftedClock]) -> None:
    app, clock = clocked
    async with Receiver([500, 500, 200]) as receiver:
        req = await app.submit(callback_url=receiver.url)
        await app.click(req["id"], "U1", user_name="alice")
        for attempt in (1, 2):
            await receiver.wait_for(attempt)
            await eventually(lambda: _item_retry_scheduled(app, req["id"], attempt), f"retry {attempt} scheduled")
            item = await webhook_item(app, req["id"])
            assert item.last_error == "HTTP 500"
            clock.advance(10)  # past the backoff: due now
            await drain(app)
        await receiver.wait_for(3)
        await eventually(lambda: _item_status(app, req["id"], "done"), "the webhook to be marked done")
        clock.advance(3600)
        await drain(app)
        assert len(receiver.deliveries) == 3
    item = await webhook_item(app, req["id"])
    assert item.attempts == 3
    bodies = [check_signed(h, raw) for h, raw in receiver.deliveries]
    assert bodies[0] == bodies[1] == bodies[2] and bodies[0]["type"] == "approval.decided"
    assert len({h["X-Signoff-Delivery"] for h, _ in receiver.deliveries}) == 1
    delivered = [e for e in await store_of(app).audit_events(req["id"]) if e.type == "webhook_delivered"]
    assert len(delivered) == 1 and delivered[0].data["attempts"] == 3


async def _item_retry_scheduled(app: App, request_id: str, attempts: int) -> bool:
    item = await webhook_item(app, request_id)
    return item.attempts == attempts and item.last_error is not None and item.status == "pending"


async def test_webhook_gives_up_after_max_attempts(clocked: tuple[App, ShiftedClock]) -> None:
    app, clock = clocked  # SIGNOFF_WEBHOOK_MAX_ATTEMPTS=3
    async with Receiver([503]) as receiver:
        req = await app.submit(callback_url=receiver.url)
        await app.click(req["id"], "U1")
        for attempt in (1, 2):
            await receiver.wait_for(attempt)
            await eventually(lambda: _item_retry_scheduled(app, req["id"], attempt), f"retry {attempt} scheduled")
            clock.advance(10)
            await drain(app)
        await receiver.wait_for(3)
        await eventually(lambda: _item_status(app, req["id"], "dead"), "the webhook to be given up")
        clock.advance(3600)
        await drain(app)
        assert len(receiver.deliveries) == 3
    item = await webhook_item(app, req["id"])
    assert item.attempts == 3 and "HTTP 503" in (item.last_error or "")
    [failed] = [e for e in await store_of(app).audit_events(req["id"]) if e.type == "webhook_failed"]
    assert failed.data["url"] == receiver.url and "3 attempts" in failed.data["error"]
    # The decision itself stands.
    _, body = await app.api("GET", f"{APPROVALS}/{req['id']}")
    assert body["status"] == "approved"
    samples = metric_samples(await metrics_text(app))
    assert samples[("signoff_webhook_failures_total", ())] == 1


async def test_callback_url_needs_a_webhook_secret(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SIGNOFF_WEBHOOK_SECRET="")
    try:
        status, body = await app.api("POST", APPROVALS, json=approval_body(callback_url="https://agent.test/hook"))
        assert status == 400
        assert "callback_url" in body["error"]["message"] and "SIGNOFF_WEBHOOK_SECRET" in body["error"]["message"]
        assert await counts(app) == (0, 0, 0)
        # Without a callback_url the server works as usual.
        status, _ = await app.api("POST", APPROVALS, json=approval_body())
        assert status == 201
    finally:
        await app.stop()


# -- health and metrics ------------------------------------------------------------------------------------------


async def test_healthz(app: App) -> None:
    async with app.session.get(app.url + "/healthz", headers=app.headers) as resp:
        assert resp.status == 200 and resp.content_type == "application/json"
        body = await resp.json()
    assert body["ok"] is True and body["database"] == store_of(app).dialect


async def health(app: App, token: str | None, query: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(app.url + "/healthz" + query, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_healthz_says_up_or_down_to_anyone_and_the_details_only_to_an_admin_or_metrics_token(
        db_url: str, slack: SlackEmulator) -> None:
    """The workspace, the bot and an undelivered request's id and channel are for the operator."""
    app = await start_app(db_url, slack, SIGNOFF_API_TOKENS=f"ops:{API_TOKEN}:admin,bot:agent-token-2:agent",
                          SIGNOFF_METRICS_TOKEN="metrics-token-3")
    try:
        assert app.signoff is not None
        app.signoff.slack_health.identity = {"team": "Acme Corp", "bot": "signoff"}  # what serve's auth.test sets
        slack.error("chat.postMessage", "channel_not_found")
        req = await app.submit()
        await eventually(lambda: _undelivered(app), "the card's failure to be recorded")
        for token in (None, "agent-token-2", "not-a-token"):
            status, body = await health(app, token)
            assert (status, body) == (200, {"status": "ok"}), token
            status, body = await health(app, token, "?details=1")
            assert status == 401 and body["error"]["code"] == "unauthorized", token
            assert req["id"] not in json.dumps(body) and "Acme" not in json.dumps(body)
        for token in (API_TOKEN, "metrics-token-3"):
            status, body = await health(app, token, "?details=1")
            assert status == 200 and body["status"] == "ok" and body["database"] == store_of(app).dialect
            assert body["slack"]["team"] == "Acme Corp" and body["slack"]["bot"] == "signoff"
            assert body["slack"]["last_undelivered"]["request_id"] == req["id"]
            assert body["slack"]["last_undelivered"]["channel"] == "C1"
    finally:
        await app.stop()


async def _undelivered(app: App) -> bool:
    assert app.signoff is not None
    return app.signoff.slack_health.last_undelivered is not None


async def metrics_text(app: App) -> str:
    async with app.session.get(app.url + "/metrics") as resp:
        assert resp.status == 200
        assert resp.content_type == "text/plain"
        return await resp.text()


def metric_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics(clocked: tuple[App, ShiftedClock]) -> None:
    app, clock = clocked
    app.slack.fail("chat.postMessage", status=500)
    req = await app.submit(risk="medium")
    await app.slack.wait_for("chat.postMessage", ok_only=False)
    await eventually(lambda: _post_retry_scheduled(app, req["id"]), "the failed card post to be rescheduled")
    clock.advance(10)
    await drain(app)
    await app.click(req["id"], "U1")
    status, body = await app.api("GET", f"{APPROVALS}/{req['id']}?wait=5")
    assert status == 200 and body["status"] == "approved"
    # On PostgreSQL the long-poll may be woken by the decision's NOTIFY (and read the request) a moment
    # before the deciding task has run its after-commit hooks, which count the decision: wait for it.
    decided = ("signoff_decisions_total", (("outcome", "approved"), ("via", "button")))

    async def counted() -> bool:
        return decided in metric_samples(await metrics_text(app))

    await eventually(counted, "the decision to be counted")
    samples = metric_samples(await metrics_text(app))
    assert samples[("signoff_requests_created_total", (("kind", "approval"), ("risk", "medium")))] == 1
    assert samples[decided] == 1
    assert samples[("signoff_slack_api_errors_total", (("method", "chat.postMessage"), ("status", "500")))] == 1
    assert samples[("signoff_slack_ack_seconds_count", (("type", "interactive"),))] == 1
    assert ("signoff_slack_ack_seconds_bucket", (("le", "0.1"), ("type", "interactive"))) in samples
    assert samples[("signoff_slack_ack_seconds_bucket", (("le", "+Inf"), ("type", "interactive")))] == 1
    assert samples[("signoff_slack_click_backlog", ())] == 0  # the click's work is done


async def _post_retry_scheduled(app: App, request_id: str) -> bool:
    items = [i for i in await store_of(app).outbox_items(request_id) if i.kind == "slack.post_card"]
    return bool(items) and items[0].attempts == 1 and items[0].last_error is not None


@pytest.mark.parametrize("path", ["/healthz", "/metrics"])
async def test_health_and_metrics_need_no_token(app: App, path: str) -> None:
    async with aiohttp.ClientSession() as session, session.get(app.url + path) as resp:
        assert resp.status == 200
