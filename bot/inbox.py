"""App Home bookkeeping shared by the use cases: who is kept up to date, and the outbox item that does it.

A person's Home is republished (through the outbox, so 429s and crashes are retried) whenever
something in it changes for them: a request where they approve is created, decided, escalated
to them or handed back. Only people who have opened Signoff's Home are kept up to date; the rest
get a fresh Home the moment they open it. The item's key is deterministic in the change that caused
it (request id and version), so a repeated sweep tick or a retried unit enqueues it once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from storage.base import OutboxItem, Unit

HOME_KIND = "slack.publish_home"
_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")


def user_ids(entries: Iterable[str]) -> list[str]:
    """The Slack user ids among `entries` (user groups, S..., are not people)."""
    return [e for e in dict.fromkeys(entries) if _USER_ID.match(e)]


def home_item(user_id: str, key: str, now: datetime) -> OutboxItem:
    # Not ordered behind the request's Slack calls: the Home is read fresh anyway.
    return OutboxItem.due(HOME_KIND, f"home:{user_id}:{key}", now, ordered_by=None, payload={"user": user_id})


async def republish_homes(unit: Unit, people: Iterable[str], key: str, now: datetime) -> None:
    """Enqueue a Home refresh, keyed `key`, for each of `people` who uses App Home."""
    await enqueue_homes(unit, await unit.home_users(user_ids(people)), key, now)


async def enqueue_homes(unit: Unit, home_user_ids: Iterable[str], key: str, now: datetime) -> None:
    """Enqueue a Home refresh, keyed `key`, for each of these App Home users."""
    for user_id in sorted(home_user_ids):
        await unit.enqueue(home_item(user_id, key, now))
