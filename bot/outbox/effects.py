"""Every side effect Signoff commits to the outbox: its kind, and the one constructor of its items.

A use case never builds an `OutboxItem` by hand: it calls one of the constructors below in the
unit that makes the change, so the kind, the dedupe key's shape and the payload each effect's
handler reads are written down once. Each delivery class hands over the handlers of the kinds
it performs (`handlers()`), and `registry()` puts them together for the process, refusing a kind
with no handler or with two (bot/process/app.py wires it).

Items of one request (or one run) carry its id as `ordered_by`, so the dispatcher delivers them
in order; App Home refreshes are not ordered behind anything (the Home is rendered fresh).
Dedupe keys are deterministic in the change that caused the effect, so a repeated tick or a
retried unit stores an effect once.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from bot.domain.model import Request
from bot.domain.runs import Run
from bot.domain.wire import request_json
from bot.domain.outbox import OutboxItem

# Requests and their cards
POST_CARD = "slack.post_card"
UPDATE_CARD = "slack.update_card"
POST_PAGE = "slack.post_batch_page"  # a batch card's continuation page, in the card's thread
WEBHOOK = "webhook"
# Timers (reminders, escalation, hand-back) and their direct messages
REMIND = "slack.remind"
ESCALATE = "slack.escalate"
HANDBACK = "slack.handback"
DM = "slack.dm"
# App Home
PUBLISH_HOME = "slack.publish_home"
# Agent runs
POST_ROOT = "agent.post_root"
UPDATE_ROOT = "agent.update_root"
THREAD_NOTE = "agent.note"
# Policy (issue 12): the after-the-fact note in the channel for a call policy allowed
POLICY_FYI = "policy.fyi"
# Time to decide (bot/approvals/stats.py): a channel's weekly digest
DIGEST = "slack.digest"
# The similar-requests card (bot/approvals/similar.py): posted once, then updated as its requests change
SIMILAR_POST = "slack.similar_post"
SIMILAR_UPDATE = "slack.similar_update"
# Claude's answer to a person's question in a card's thread (bot/approvals/assist.py)
ASSIST_ANSWER = "slack.assist_answer"

KINDS = frozenset({POST_CARD, UPDATE_CARD, POST_PAGE, WEBHOOK, REMIND, ESCALATE, HANDBACK, DM, PUBLISH_HOME, POST_ROOT,
                   UPDATE_ROOT, THREAD_NOTE, POLICY_FYI, DIGEST, SIMILAR_POST, SIMILAR_UPDATE, ASSIST_ANSWER})

# The webhooks' event types (docs/api.md)
DECIDED_EVENT = "approval.decided"
UNDELIVERED_EVENT = "approval.undelivered"

Handler = Callable[[OutboxItem], Awaitable[Any]]  # returns an outbox Result (bot/outbox/dispatcher.py)


class RegistryError(RuntimeError):
    """The process's handlers do not cover every kind exactly once (a wiring bug: fail at start)."""


def registry(*groups: Mapping[str, Handler]) -> dict[str, Handler]:
    """All handlers of the process, one per kind; every kind must be covered exactly once."""
    merged: dict[str, Handler] = {}
    for group in groups:
        for kind, handler in group.items():
            if kind not in KINDS:
                raise RegistryError(f"handler for unknown outbox kind {kind!r}")
            if kind in merged:
                raise RegistryError(f"two handlers for outbox kind {kind!r}")
            merged[kind] = handler
    missing = KINDS - merged.keys()
    if missing:
        raise RegistryError(f"no handler for outbox kind(s) {', '.join(sorted(missing))}")
    return merged


def _of_request(kind: str, request_id: str, dedupe_key: str, now: datetime, **payload: Any) -> OutboxItem:
    return OutboxItem.due(kind, dedupe_key, now, ordered_by=request_id, payload={"request_id": request_id, **payload})


def post_card(request_id: str, now: datetime) -> OutboxItem:
    return _of_request(POST_CARD, request_id, f"post:{request_id}", now)


def update_card(request_id: str, key: str, now: datetime) -> OutboxItem:
    """Re-render the card from the request's state at delivery time; `key` names the change."""
    return _of_request(UPDATE_CARD, request_id, key, now)


def decided_card_key(request_id: str) -> str:
    """The dedupe key of a decision's card update (the decided request is found under it in
    bot/live/just_committed.py by the delivery that renders it)."""
    return f"card:{request_id}:decided"


def decided_card(request_id: str, now: datetime) -> OutboxItem:
    """A decision's card update: one per request, whoever decided."""
    return update_card(request_id, decided_card_key(request_id), now)


def post_page(request_id: str, page: int, now: datetime) -> OutboxItem:
    return _of_request(POST_PAGE, request_id, f"post:{request_id}:page:{page}", now, page=page)


def webhook(request_id: str, key: str, now: datetime, *, url: str, body: dict[str, Any]) -> OutboxItem:
    return _of_request(WEBHOOK, request_id, key, now, url=url, body=body)


def decided_webhook(request: Request, now: datetime, *, again: bool = False) -> OutboxItem | None:
    """The agent's `approval.decided` webhook of a decided request (None without a `callback_url`).
    Its dedupe key is one per request, whoever decided (a person, policy, a grant, the clock), so a
    retried unit or a second path to the same decision sends it once; `again` (an operator's
    redelivery) is a new delivery, keyed by its time."""
    if not request.callback_url:
        return None
    body = {"type": DECIDED_EVENT, "request": request_json(request)}
    key = f"webhook:{request.id}:redeliver:{now.timestamp():.6f}" if again else f"webhook:{request.id}:decided"
    return webhook(request.id, key, now, url=request.callback_url, body=body)


def undelivered_webhook(request: Request, now: datetime) -> OutboxItem | None:
    """The agent's `approval.undelivered` webhook of a request whose card Slack refused for good (None
    without a `callback_url`): one per request."""
    if not request.callback_url:
        return None
    body = {"type": UNDELIVERED_EVENT, "request": request_json(request)}
    return webhook(request.id, f"webhook:{request.id}:undelivered", now, url=request.callback_url, body=body)


def remind(request_id: str, number: int, of: int, now: datetime) -> OutboxItem:
    return _of_request(REMIND, request_id, f"remind:{request_id}:{number}", now, number=number, of=of)


def escalate(request_id: str, key: str, now: datetime, **payload: Any) -> OutboxItem:
    """A note in the card's thread (and DMs) that the request went up: `to`, `add`, `by`, `note`, level data."""
    return _of_request(ESCALATE, request_id, key, now, **payload)


def handback(request_id: str, key: str, now: datetime, **payload: Any) -> OutboxItem:
    return _of_request(HANDBACK, request_id, key, now, **payload)


def dm(request_id: str, key: str, now: datetime, **payload: Any) -> OutboxItem:
    return _of_request(DM, request_id, key, now, **payload)


def policy_fyi(request_id: str, now: datetime) -> OutboxItem:
    """Tell the request's channel (or thread) that policy allowed it, once."""
    return _of_request(POLICY_FYI, request_id, f"fyi:{request_id}", now)


def digest(channel: str, week: datetime, now: datetime, message: dict[str, Any]) -> OutboxItem:
    """The channel's digest of the week before `week` (its start): one per channel and week, whoever enqueues it."""
    return OutboxItem.due(DIGEST, f"digest:{channel}:{week:%Y-%m-%d}", now, ordered_by=None,
                          payload={"channel": channel, "message": message})


def assist_answer(request_id: str, channel: str, thread_ts: str, question_ts: str, user: str, text: str,
                  now: datetime, *, in_run: bool = False) -> OutboxItem:
    """Claude's answer to the question posted at `question_ts`, in its thread: once per question."""
    return _of_request(ASSIST_ANSWER, request_id, f"answer:{request_id}:{question_ts}", now, channel=channel,
                       thread_ts=thread_ts, question_ts=question_ts, user=user, text=text, in_run=in_run)


def similar_post(card_id: str, now: datetime) -> OutboxItem:
    """Post a similar-requests card, once; rendered from its requests' state at delivery time."""
    return OutboxItem.due(SIMILAR_POST, f"similar:{card_id}:post", now, ordered_by=card_id,
                          payload={"card_id": card_id})


def similar_update(card_id: str, state: str, now: datetime) -> OutboxItem:
    """Update a similar-requests card once its requests reached `state` (one item per state, whoever saw it
    first); rendered at delivery time, in order after its post."""
    return OutboxItem.due(SIMILAR_UPDATE, f"similar:{card_id}:{state}", now, ordered_by=card_id,
                          payload={"card_id": card_id, "state": state})


def publish_home(user_id: str, key: str, now: datetime) -> OutboxItem:
    # Not ordered behind the request's Slack calls: the Home is read fresh anyway.
    return OutboxItem.due(PUBLISH_HOME, f"home:{user_id}:{key}", now, ordered_by=None, payload={"user": user_id})


def _of_run(kind: str, run_id: str, dedupe_key: str, now: datetime, **payload: Any) -> OutboxItem:
    return OutboxItem.due(kind, dedupe_key, now, ordered_by=run_id, payload={"run_id": run_id, **payload})


def post_root(run: Run, now: datetime) -> OutboxItem:
    return _of_run(POST_ROOT, run.id, f"run:{run.id}:root", now)


def update_root(run_id: str, now: datetime) -> OutboxItem:
    # Every change gets its own item; the message is rendered when it is delivered, so a late
    # or repeated update still shows the latest state.
    return _of_run(UPDATE_ROOT, run_id, f"run:{run_id}:root:{uuid.uuid4().hex}", now)


def note(run_id: str, key: str, message: dict[str, Any], now: datetime) -> OutboxItem:
    """A message in the run's thread; `key` makes it unique (the same key is posted once)."""
    return _of_run(THREAD_NOTE, run_id, f"run:{run_id}:note:{key}", now, message=message, key=key)
