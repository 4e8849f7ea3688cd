"""Time to decide, as numbers: a summary of the approval requests of one time range (pure).

Definitions (docs/stats.md says the same to operators):
- *time to decide*: from the request's creation to a person's decision (a click, a form, a reply;
  an approval held in its undo window counts from the click). Decisions by policy, a grant, the clock
  (a timeout) or the agent (cancel) are not a person's and are not timed.
- *time to first view*: from creation to the first time a person opened it: its App Home listing, one
  of its forms (Edit, Reject, Reply instead, the typed confirmation, Escalate), or deciding it from the
  card. Slack says nothing when someone merely reads a message, so a card read and left alone is not a view.
- *expired*: ended by its timeout (whatever the timeout's outcome); *escalated*: went up at least once
  (by its timer or by hand); *edited*: approved with changed parameters; *rejected*: by a person.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

PERSON_VIAS = frozenset({"button", "modal", "reply"})


@dataclass(frozen=True)
class StatsRow:
    """One request of the range, as the statistics read it (storage/stats_sql.py)."""

    id: str
    channel: str
    tool: str
    tier: str
    status: str
    created_at: datetime
    first_viewed_at: datetime | None = None
    decided_at: datetime | None = None
    via: str | None = None
    edited: bool = False
    escalated: bool = False

    @property
    def by_person(self) -> bool:
        return self.decided_at is not None and self.via in PERSON_VIAS

    @property
    def time_to_decide(self) -> timedelta | None:
        return self.decided_at - self.created_at if self.by_person and self.decided_at else None

    @property
    def time_to_first_view(self) -> timedelta | None:
        seen = self.first_viewed_at or (self.decided_at if self.by_person else None)
        return seen - self.created_at if seen is not None else None


@dataclass(frozen=True)
class Summary:
    since: datetime
    until: datetime
    channel: str | None  # None: the whole workspace
    requests: int = 0
    decided_by_people: int = 0
    pending: int = 0
    median_to_decide: timedelta | None = None
    p90_to_decide: timedelta | None = None
    median_to_first_view: timedelta | None = None
    approved: int = 0
    rejected: int = 0
    expired: int = 0
    escalated: int = 0
    edited: int = 0
    expired_ids: tuple[tuple[str, str], ...] = ()  # (request id, tool), oldest first
    top_tools: tuple[tuple[str, int], ...] = ()
    truncated: bool = False  # more requests than the read's cap: the figures cover the first ones
    by_channel: dict[str, int] = field(default_factory=dict)


def percentile(values: list[timedelta], p: float) -> timedelta | None:
    """The nearest-rank percentile (p in 0..100) of `values`; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(rows: list[StatsRow], *, since: datetime, until: datetime, channel: str | None,
              truncated: bool = False, top: int = 5) -> Summary:
    to_decide = [t for r in rows if (t := r.time_to_decide) is not None]
    to_view = [t for r in rows if (t := r.time_to_first_view) is not None]
    expired = [r for r in rows if r.status == "expired" or (r.decided_at is not None and r.via == "timeout")]
    tools = Counter(r.tool for r in rows)
    return Summary(
        since=since, until=until, channel=channel, requests=len(rows),
        decided_by_people=len(to_decide), pending=sum(r.status == "pending" for r in rows),
        median_to_decide=percentile(to_decide, 50), p90_to_decide=percentile(to_decide, 90),
        median_to_first_view=percentile(to_view, 50),
        approved=sum(r.status == "approved" for r in rows),
        rejected=sum(r.status == "rejected" and r.by_person for r in rows),
        expired=len(expired), escalated=sum(r.escalated for r in rows), edited=sum(r.edited for r in rows),
        expired_ids=tuple((r.id, r.tool) for r in sorted(expired, key=lambda r: r.created_at)),
        top_tools=tuple(sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))[:top]),
        truncated=truncated, by_channel=dict(Counter(r.channel for r in rows)),
    )


def week_start(now: datetime, weekday: int = 0, hour: int = 9) -> datetime:
    """The latest digest time at or before `now`: `weekday` (0 = Monday) at `hour`:00 UTC."""
    day = now.replace(hour=hour, minute=0, second=0, microsecond=0) - timedelta(days=(now.weekday() - weekday) % 7)
    return day if day <= now else day - timedelta(days=7)


def short(delta: timedelta | None) -> str:
    """`42 s`, `3 min`, `1 h 20 min`, `2 d 4 h`; `–` for none."""
    if delta is None:
        return "–"
    seconds = int(delta.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
