"""Outbox handlers that talk to Slack: post the card, update the card.

The card is always rendered from the request's state at delivery time, so a
late or repeated delivery shows the latest truth. The stored `ts` is the proof
that a card exists: a post never happens twice for one request. The one window
where Slack may have posted but we did not store the ts (the process died
mid-call) is closed by looking for our earlier message: every card carries
`metadata` with the request id, and an uncertain retry searches the channel's
history for it before posting again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any, Protocol

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.process.clock import Clock
from bot.domain.grants import agent_of
from bot.domain.model import AuditEvent, Request
from bot.domain.values import Risk
from bot.process.metrics import Metrics
from bot.outbox.dispatcher import Dead, Done, Result, Retry, after_post, backoff, delivering
from bot.outbox import effects
from bot.outbox.effects import Handler
from bot.approvals.service import Service
from bot.slack.blocks import approval_card
from bot.slack.failures import TRANSIENT_ERRORS, SlackHealth, permanent_failure
from bot.slack.lookup import find_message, has_metadata
from bot.approvals import delivery_results
from bot.slack.pace import INLINE_WAIT_SECONDS, PACED_METHODS, ChannelPace, posting_for
from bot.domain.outbox import OutboxItem
from bot.domain.outbox import CardPosted

log = logging.getLogger(__name__)

CARD_EVENT_TYPE = "signoff_card"


class SlackCall:
    """Runs one Web API call and turns every failure into an outbox Result.

    Errors no retry gets past (a bad token, a missing scope, a channel the bot is not in) are a
    `Dead` whose `line` says what to do and whose `details` name the error (see bot.slack.failures);
    429s, 5xx, timeouts and Slack's transient errors are a `Retry`. `health` follows the token's state.
    Posts are paced per channel (`pace`, bot.slack.pace): a 429 delays only its channel.
    """

    def __init__(
        self, client: AsyncWebClient, metrics: Metrics, health: SlackHealth | None = None,
        pace: ChannelPace | None = None,
    ) -> None:
        self.client = client
        self.metrics = metrics
        self.health = health or SlackHealth()
        self.pace = pace

    async def __call__(
        self, method: str, attempt: int, **kwargs: Any
    ) -> tuple[dict[str, Any] | None, Result | None]:
        channel = kwargs.get("channel") if self.pace is not None else None
        if isinstance(channel, str) and method in PACED_METHODS:
            assert self.pace is not None
            while (wait := await self.pace.wait_for(channel, delivering.get())) > 0:
                if wait > INLINE_WAIT_SECONDS:  # not this channel's turn: free the slot, come back just before it
                    # (a little early, to wait the rest here: a post ahead that ran a little late, or another
                    # replica's post at that slot, then costs no second put-back)
                    return None, Retry(wait - INLINE_WAIT_SECONDS / 2, f"{method}: paced for channel {channel}",
                                       waiting=True)
                await asyncio.sleep(wait)
        try:
            try:
                response = await getattr(self.client, method.replace(".", "_"))(**kwargs)
            finally:
                if isinstance(channel, str) and method in PACED_METHODS and self.pace is not None:
                    self.pace.sent(channel)
            self.health.ok()
            return dict(response.data), None
        except SlackApiError as exc:
            status = exc.response.status_code
            data = exc.response.data if isinstance(exc.response.data, dict) else {}
            error = str(data.get("error", ""))
            self.metrics.slack_api_errors.labels(method, str(status) if status != 200 else error).inc()
            if status == 429:
                retry_after = _retry_after(exc.response.headers)
                if self.pace is not None and isinstance(channel, str):
                    await self.pace.rate_limited(channel, retry_after)
                return None, Retry(retry_after, f"{method}: 429 rate limited, retry after {retry_after:g}s")
            if status >= 500:
                self.health.unreachable(f"{method}: HTTP {status}")
                return None, Retry(backoff(attempt), f"{method}: HTTP {status}", definite=False)
            if error in TRANSIENT_ERRORS:
                self.health.unreachable(f"{method}: {error}")
                return None, Retry(backoff(attempt, base=5), f"{method}: {error}")
            failure = permanent_failure(method, error, data, channel=kwargs.get("channel"))
            if failure is not None:
                self.health.refused(failure)
                return None, Dead(f"{method}: {error}", line=failure.line, details=failure.to_json())
            return None, Dead(f"{method}: {error or 'HTTP ' + str(status)}")
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            self.metrics.slack_api_errors.labels(method, "connection").inc()
            self.health.unreachable(f"{method}: {type(exc).__name__}")
            return None, Retry(backoff(attempt), f"{method}: {type(exc).__name__}: {exc}", definite=False)


def _retry_after(headers: Any) -> float:
    value = None
    for key, v in (headers or {}).items():
        if key.lower() == "retry-after":
            value = v[0] if isinstance(v, list) else v
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except ValueError:
        return 1.0


class CardRenderer(Protocol):
    """Builds a card message ({"text", "blocks"}) from a request's state at `now`."""

    def __call__(self, req: Request, *, now: datetime) -> dict[str, Any]: ...


_RANK = {Risk.CRITICAL: 0, Risk.HIGH: 1, Risk.MEDIUM: 2, Risk.LOW: 3}  # a channel's queue, most urgent first


class CardDelivery:
    def __init__(self, service: Service, call: SlackCall, clock: Clock, *, render: CardRenderer = approval_card):
        self.service = service
        self.call = call
        self.clock = clock
        self.render = render

    def handlers(self) -> dict[str, Handler]:
        return {effects.POST_CARD: self.post, effects.UPDATE_CARD: self.update}

    async def post(self, item: OutboxItem, read: Request | None = None) -> Result:
        """`read`: the request as the caller just read it (one read per delivery, not one per layer)."""
        request = read if read is not None else await self.service.reads.request(item.payload["request_id"])
        if request is None:
            return Dead("request no longer exists")
        if request.card_ts:
            return Done()  # already posted: the stored ts is the proof
        if item.uncertain:
            found = await self._find_posted(request, item.attempts)
            if isinstance(found, str):
                return Done(card=CardPosted(request.id, request.channel, found))
            if found is not None:
                return found
        card = self.render(request, now=self.clock.now())
        posting_for.set((_RANK.get(request.risk, 1), agent_of(request.extra)))  # this delivery's task only
        data, failure = await self.call(
            "chat.postMessage",
            item.attempts,
            channel=request.channel,
            text=card["text"],
            blocks=card["blocks"],
            metadata={"event_type": CARD_EVENT_TYPE, "event_payload": {"request_id": request.id}},
            unfurl_links=False,
            unfurl_media=False,
            **({"thread_ts": request.thread_ts} if request.thread_ts else {}),  # a card in an agent run's thread
        )
        if failure is not None:
            if isinstance(failure, Dead):
                return self._undelivered(request, failure)
            return failure
        assert data is not None
        return Done(card=CardPosted(request.id, data["channel"], data["ts"]))

    def _undelivered(self, request: Request, failure: Dead) -> Dead:
        """The card cannot be posted: audit it, mark the request (its `delivery` says why) and wake
        whoever waits on it, so the agent hears at once rather than at the timeout."""
        audit = AuditEvent(request.id, "post_failed", self.clock.now(), None, {"error": failure.error})
        details = failure.details or {"error": failure.error.rpartition(": ")[2], "message": failure.error}
        self.call.health.undelivered(request.id, details)
        return Dead(failure.error, (audit,), line=failure.line,
                    apply=delivery_results.undelivered(request.id, details, self.clock.now(), touch=self.service.touch))

    async def _find_posted(self, request: Request, attempt: int) -> str | Result | None:
        """Our card for `request` if an earlier, interrupted attempt posted it (its ts), else None."""

        is_card = has_metadata(CARD_EVENT_TYPE, request_id=request.id)
        if request.thread_ts:  # a card in a run's thread is only in the thread's replies
            return await find_message(self.call, attempt, is_card, channel=request.channel,
                                      thread_ts=request.thread_ts)
        oldest = (request.created_at - timedelta(minutes=1)).timestamp()
        return await find_message(self.call, attempt, is_card, channel=request.channel, oldest=f"{oldest:.6f}")

    async def update(self, item: OutboxItem, read: Request | None = None) -> Result:
        request = read if read is not None else await self.service.reads.request(item.payload["request_id"])
        if request is None:
            return Dead("request no longer exists")
        if not request.has_card:
            return await after_post(self.service.reads, request.id, effects.POST_CARD, "card")
        card = self.render(request, now=self.clock.now())
        _, failure = await self.call(
            "chat.update",
            item.attempts,
            channel=request.card_channel,
            ts=request.card_ts,
            text=card["text"],
            blocks=card["blocks"],
        )
        if failure is not None:
            return failure
        return Done(audit=(AuditEvent(request.id, "card_updated", self.clock.now(), None,
                                      {"status": request.status.value}),))
