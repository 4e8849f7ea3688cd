"""Slack's way in: POST /slack/events and Socket Mode's requests, stored before their ack and acked in time.

What Slack sends that must not be lost (clicks, modal answers, events, commands) is stored first
(bot/slack/received.py), then acked: a click as soon as it is stored, its listener run from the
backlog (or at once when it opens a modal, whose trigger_id expires in 3 s); a modal's answer or a
command's reply as soon as its listener calls ack(), within `ACK_WITHIN_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncAck
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.agent.blocks import CORRECT_RUN
from bot.process.lifecycle import SIGNOFF, Signoff
from bot.slack import blocks, shapes
from bot.slack.backlog import Work
from bot.slack.batch_blocks import BATCH_REJECT, ITEM_EDIT
from bot.slack.form import parsed_request
from bot.slack.grant_views import AWAY
from bot.slack.listener_errors import AckTooLate
from bot.slack.payloads import BadPayload, extract_click
from bot.slack.policy_cards import REMEMBER
from bot.slack.received import Unavailable

log = logging.getLogger(__name__)

# Clicks whose listener opens a modal: views.open needs the click's trigger_id within 3 s, so their
# listeners run at once instead of from the backlog.
OPENS_VIEW = frozenset({blocks.APPROVE_CONFIRM, blocks.EDIT, blocks.REJECT, blocks.RESPOND, blocks.ESCALATE, ITEM_EDIT, BATCH_REJECT,
                        REMEMBER, AWAY, CORRECT_RUN})
ACK_WITHIN_SECONDS = 2.5  # Slack gives up after 3 s
# What Slack sends that is stored before its ack (bot/slack/received.py); and slash commands.
DURABLE = frozenset({"block_actions", "view_submission", "event_callback"})


async def socket_intake(signoff: Signoff, request: AsyncBoltRequest, raw: str) -> BoltResponse | None:
    """A Socket Mode request stored before its ack, like slack_events' (None: not one to store)."""
    body = request.body
    if body.get("type") not in DURABLE and "command" not in body:
        return None
    if signoff.team is not None and (refused := await signoff.team.check(body)) is not None:
        return BoltResponse(status=refused, body="")
    try:
        row = await signoff.inbox.accept(body, raw, "application/json")
    except Unavailable:  # no ack: Slack shows the person an error
        return BoltResponse(status=503, body="")
    if row is None:
        return BoltResponse(status=200, body="")
    return await _when_acked(signoff, request, row)


async def slack_events(request: web.Request) -> web.Response:
    signoff = request.app[SIGNOFF]
    started = time.perf_counter()
    body = await request.text()
    # Bolt verifies too, but only after parsing; a signed-but-malformed body must not become a 500.
    if not signoff.verifier.is_valid_request(body, dict(request.headers)):
        return web.json_response({"error": "invalid request"}, status=401)
    with signoff.backlog.handling():  # only Slack's own requests hold clicks' work back, until answered
        return await _answered(signoff, request, body, started)


async def _answered(signoff: Signoff, request: web.Request, body: str, started: float) -> web.Response:
    try:
        bolt_request = parsed_request(body, request.query_string, request.headers)
    except ValueError as exc:
        return web.json_response({"error": f"malformed Slack payload: {exc}"}, status=400)
    except (TypeError, AttributeError, KeyError, IndexError) as exc:
        # Bolt reads ids out of the body as it builds the request; a signed body of the wrong shape
        # (`"user": true`) breaks it there. Ack it (Slack must not retry) and read nothing.
        log.warning("dropped a signed Slack payload Bolt could not read: %s: %s", type(exc).__name__, exc)
        return web.Response(status=200)
    malformed = shapes.problem(bolt_request.body)
    if malformed is not None:
        # Signed, so from Slack (or whoever holds the secret): ack, so nothing is retried; read nothing.
        log.warning("dropped a signed Slack payload of the wrong shape: %s", malformed)
        return web.Response(status=200)
    if signoff.team is not None and (refused := await signoff.team.check(bolt_request.body)) is not None:
        return web.Response(status=refused)  # addressed to another workspace (acked), or ours is not known yet
    kind = bolt_request.body.get("type")
    row: int | None = None
    if kind in DURABLE or "command" in bolt_request.body:
        # Stored before the ack (bot/slack/received.py): a click Slack saw taken is handled even if this
        # process dies before its work ran. Stored before: Slack's retry of it, acked and dropped.
        try:
            row = await signoff.inbox.accept(bolt_request.body, body, bolt_request.content_type or "")
        except Unavailable:  # logged once per outage; Slack shows the person an error: nothing was promised
            return web.json_response({"error": "unavailable"}, status=503)
        if row is None:
            response = web.Response(status=200)
            signoff.metrics.ack_latency.labels(_kind(body)).observe(time.perf_counter() - started)
            return response
    if kind == "block_actions" and row is not None:
        # Slack ignores the body of a button click's ack. Answer as soon as the click is stored;
        # Bolt runs the listener afterwards, from the backlog unless it opens a modal, so the acks
        # of a burst of clicks never wait behind the listener work of the clicks before them.
        _schedule_click(signoff, request, bolt_request, body, row)
        response = web.Response(status=200)
    elif (kind == "view_submission" or "command" in bolt_request.body) and row is not None:
        # A modal's answer (validation errors) and a command's reply are whatever the listener passes
        # to ack(): answer the moment it does, and let the listener finish in the background.
        response = await to_aiohttp_response(await _when_acked(signoff, bolt_request, row))
    elif kind == "view_closed":
        response = await to_aiohttp_response(await _when_acked(signoff, bolt_request, None))
    elif kind == "event_callback" and row is not None:
        # Slack reads nothing from an event's ack but the status. Run the listener to its end in
        # the background, tracked, so that a graceful stop lets it finish.
        signoff.in_background(signoff.inbox.held_work(row, lambda: signoff.clicks.async_dispatch(bolt_request))())
        response = web.Response(status=200)
    else:  # url_verification (Bolt answers the challenge), options, shortcuts, anything else
        response = await to_aiohttp_response(await signoff.bolt.async_dispatch(bolt_request))
    signoff.metrics.ack_latency.labels(_kind(body)).observe(time.perf_counter() - started)
    return response


def _schedule_click(signoff: Signoff, request: web.Request, bolt_request: AsyncBoltRequest, body: str,
                    row: int) -> None:
    """Start or queue the listener of a stored click (row `row` of the inbox), after its ack."""
    held = signoff.inbox.held_work
    actions = bolt_request.body.get("actions") or []
    direct = _direct_click(signoff, bolt_request.body, actions)
    if direct is not None and signoff.backlog.lone():
        # A lone click (none queued, no other request being answered: a group commit answers a burst's
        # clicks in groups): started now, not two turns of the loop later. A click that comes in while
        # it runs is queued (the backlog counts it), so a burst's acks never wait behind its work.
        signoff.backlog.start_now(held(row, direct))
    elif direct is not None:
        signoff.backlog.add(held(row, direct))
    elif any(isinstance(a, dict) and a.get("action_id") in OPENS_VIEW for a in actions):
        signoff.in_background(held(row, lambda: signoff.clicks.async_dispatch(bolt_request))())
    else:
        # The backlog keeps the raw body, not the parsed one: a click's payload carries the whole
        # card (hundreds of small objects), and a burst of them held while queued would fill the
        # young GC generation, whose collections stop the event loop, acks included.
        query, headers = request.query_string, dict(request.headers)
        signoff.backlog.add(held(row, lambda: signoff.clicks.async_dispatch(parsed_request(body, query, headers))))


def _direct_click(signoff: Signoff, body: dict[str, Any], actions: list[Any]) -> Work | None:
    """The work of a lone click on a button with a direct listener (Approve), or None (Bolt's way).

    Only the small `Click` is kept while it waits in the backlog, not the payload (see above); a
    payload `extract_click` refuses goes Bolt's way, whose listener tells the person why.
    """
    if len(actions) != 1 or not isinstance(actions[0], dict):
        return None
    listener = signoff.direct_clicks.get(actions[0].get("action_id"))  # type: ignore[arg-type]
    if listener is None:
        return None
    try:
        click = extract_click(body)
    except BadPayload:
        return None
    return lambda: listener(click)


class _SignallingAck(AsyncAck):
    """Bolt's ack(), which also hands the answer it built to whoever waits for it.

    The answer is kept apart from `self.response`: if the listener fails after acking, Bolt
    overwrites that with a 500, but Slack must get what was acked.
    """

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Bolt's __init__ has no annotations
        self.answer: asyncio.Future[BoltResponse] = asyncio.get_running_loop().create_future()

    async def __call__(self, *args: Any, **kwargs: Any) -> BoltResponse:
        if self.answer.cancelled():
            # Slack was answered 500 at the deadline and told the person it failed: what the listener
            # was about to do on this ack must not happen behind their back.
            raise AckTooLate(f"the listener acked after Slack's answer was sent ({ACK_WITHIN_SECONDS:.1f} s)")
        response = await super().__call__(*args, **kwargs)
        if not self.answer.done():
            self.answer.set_result(response)
        return response


async def _when_acked(signoff: Signoff, bolt_request: AsyncBoltRequest, row: int | None) -> BoltResponse:
    """Run the listener to its end in the background; return its ack as soon as it acks.

    Bolt's own way (`process_before_response=False`) checks for the ack every 10 ms, so no answer
    came sooner than 10 ms; this one wakes on the ack itself. If the listener ends without acking
    (no listener matched, or it failed), Bolt's response for that is the answer.
    """
    ack = _SignallingAck()
    bolt_request.context["ack"] = ack
    async def dispatch() -> BoltResponse:
        return await signoff.clicks.async_dispatch(bolt_request)

    run = signoff.in_background(dispatch() if row is None else signoff.inbox.held_work(row, dispatch)())
    await asyncio.wait({run, ack.answer}, timeout=ACK_WITHIN_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    if ack.answer.done():
        return ack.answer.result()
    ack.answer.cancel()
    if run.done() and not run.cancelled() and run.exception() is None and run.result() is not None:
        answered: BoltResponse = run.result()
        return answered
    log.error("a Slack listener did not acknowledge within %.1f s", ACK_WITHIN_SECONDS)
    return BoltResponse(status=500, body="")


def _kind(text: str) -> str:
    """The kind of Slack request, from its raw body (Bolt's parsed `body` is a dict)."""
    if text.startswith("payload="):
        return "interactive"
    if text.startswith("{"):
        return "event"
    return "command" if "command=" in text else "other"
