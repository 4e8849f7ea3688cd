"""Time to decide, seen: the Prometheus histograms and counters, the last 7 days' summary (`/signoff stats`,
App Home), and the weekly digest per channel. Definitions: bot/domain/stats.py.

- Histograms are observed where the facts happen, after they commit: a decision (`decided`, an
  on-decided hook), a first view (`viewed`: one guarded stamp, so each request counts once), an
  escalation or an Undo (their use cases).
- Summaries read one indexed time range (storage/stats_sql.py) and are kept for `TTL` per scope, so
  App Home opens do not each read the week again.
- The digest: at each sweep, once the week's digest time has passed, each digest channel's summary of
  the 7 days before it is enqueued as one outbox item keyed `digest:{channel}:{week}`. The outbox stores
  a key once, so two replicas, a restart or a repeated tick post it once; the item is the stored claim.
  A channel with no requests that week gets no digest. It ends with the audit chain's latest signed
  anchor (bot/approvals/audit.py), so a copy of the head is kept outside the database every week.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.domain.audit_chain import Anchor
from bot.domain.model import Outcome, Request
from bot.outbox import effects
from bot.domain.stats import PERSON_VIAS, Summary, summarize, week_start
from bot.process.clock import Clock
from bot.process.metrics import Metrics
from storage.base import Store

log = logging.getLogger(__name__)

WEEK = timedelta(days=7)
TTL = timedelta(seconds=60)
CAP = 50_000  # requests read per summary at most (the summary says when it was cut)


class Stats:
    def __init__(self, store: Store, metrics: Metrics, clock: Clock, *, digest_channels: Sequence[str] = (),
                 digest_at: tuple[int, int] = (0, 9), cap: int = CAP,
                 stamped: Callable[[str], None] = lambda request_id: None) -> None:
        self.stamped = stamped  # told each request whose first view was stamped (the pending-states cache forgets it)
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.digest_channels = tuple(digest_channels)
        self.digest_at = digest_at
        self.cap = cap
        self._cache: dict[str | None, tuple[datetime, Summary]] = {}
        self._digested: datetime | None = None  # the week this process already enqueued
        # The digest's message (bot/slack/stats_blocks.py's digest_message, set by bot/process/app.py): rendered
        # when it is enqueued and stored in the item, so whichever replica posts it posts the same.
        self.render_digest: Callable[[Summary, Anchor | None], dict[str, Any]] | None = None
        self.latest_anchor: Callable[[], Awaitable[Anchor | None]] | None = None  # the audit chain's (app.py)
        # Blocks added to a channel's digest (the suggestions from its decisions: bot/slack/history_cards.py).
        self.digest_more: Callable[[str], Awaitable[list[dict[str, Any]]]] | None = None

    # -- metrics ------------------------------------------------------------------

    def _labels(self, request: Request) -> tuple[str, str, str]:
        m = self.metrics
        return request.risk.value, m.channel_label(request.channel), m.tool_label(request.action.name)

    def decided(self, request: Request) -> None:
        """After a decision commits (Service.on_decided): its time to decide, and what kind of end it was."""
        decision = request.decision
        if decision is None:
            return
        tier, m = request.risk.value, self.metrics
        if decision.via.value in PERSON_VIAS:
            labels = self._labels(request)
            took = (decision.decided_at - request.created_at).total_seconds()
            m.time_to_decision.labels(*labels).observe(took)
            # Deciding is the first view when nothing came before. (Another replica's cached copy of a request
            # may not know of a view stamped meanwhile: then this counts it again; `/signoff stats` reads the rows.)
            if request.first_viewed_at is None:
                m.time_to_first_view.labels(*labels).observe(took)
            if decision.outcome is Outcome.REJECTED:
                m.request_outcomes.labels("rejected", tier).inc()
            elif decision.outcome is Outcome.APPROVED and decision.changes:
                m.request_outcomes.labels("edited", tier).inc()
        elif decision.outcome is Outcome.EXPIRED or decision.via.value == "timeout":
            m.request_outcomes.labels("expired", tier).inc()

    def counted(self, what: str, request: Request) -> None:
        """`escalated` or `undone` (after its unit commits)."""
        self.metrics.request_outcomes.labels(what, request.risk.value).inc()

    async def viewed(self, request_ids: Sequence[str]) -> None:
        """A person opened these requests (App Home listed them, or they opened one's form): stamp the
        first view of each pending one that had none, and observe its time to first view."""
        if not request_ids:
            return
        try:
            stamped = await self.store.mark_viewed(list(dict.fromkeys(request_ids)), self.clock.now())
        except Exception:  # statistics never fail what the person did
            log.exception("could not record a first view")
            return
        m = self.metrics
        for row in stamped:
            assert row.first_viewed_at is not None
            self.stamped(row.id)
            m.time_to_first_view.labels(row.tier, m.channel_label(row.channel), m.tool_label(row.tool)).observe(
                (row.first_viewed_at - row.created_at).total_seconds())

    # -- summaries ----------------------------------------------------------------

    async def last_week(self, channel: str | None) -> Summary:
        """The 7 days up to now, of `channel` or (None) the whole workspace; at most `TTL` old."""
        now = self.clock.now()
        kept = self._cache.get(channel)
        if kept is not None and now - kept[0] < TTL and now >= kept[0]:
            return kept[1]
        summary = await self.summary(now - WEEK, now, channel)
        if len(self._cache) > 1000:
            self._cache.clear()
        self._cache[channel] = (now, summary)
        return summary

    async def summary(self, since: datetime, until: datetime, channel: str | None) -> Summary:
        rows, truncated = await self.store.stats_rows(since, until, channel, cap=self.cap)
        return summarize(rows, since=since, until=until, channel=channel, truncated=truncated)

    # -- the weekly digest ----------------------------------------------------------

    async def digest_tick(self) -> int:
        """Enqueue this week's digests if due and not yet enqueued here; the number enqueued now (the
        outbox keeps one per channel and week, whoever enqueued it first)."""
        if not self.digest_channels or self.render_digest is None:
            return 0

        now = self.clock.now()
        week = week_start(now, *self.digest_at)
        if self._digested == week:
            return 0
        since = week - WEEK
        channels = [c for c in self.digest_channels if c != "all"]
        if "all" in self.digest_channels:
            channels = list(dict.fromkeys([*channels, *await self.store.stats_channels(since, week, cap=1000)]))
        enqueued = 0
        anchor = await self.latest_anchor() if self.latest_anchor is not None else None
        for channel in channels:
            summary = await self.summary(since, week, channel)
            if not summary.requests:
                continue  # a quiet week: no message
            message = self.render_digest(summary, anchor)
            if self.digest_more is not None:
                message = {**message, "blocks": [*message["blocks"], *await self.digest_more(channel)]}
            async with self.store.unit() as unit:
                if await unit.enqueue(effects.digest(channel, week, now, message)):
                    enqueued += 1
        self._digested = week
        return enqueued
