"""App Home bookkeeping shared by the use cases: whose Home to refresh when a request changes.

A person's Home is republished (through the outbox, so 429s and crashes are retried) whenever
something in it changes for them: a request where they approve is created, decided, escalated
to them or handed back. Only people who have opened Signoff's Home are kept up to date; the rest
get a fresh Home the moment they open it. The item's key is deterministic in the change that caused
it (request id and version), so a repeated sweep tick or a retried unit enqueues it once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from bot.outbox import effects
from bot.domain.values import is_user_id
from bot.domain.outbox import OutboxItem
from storage.base import Store, Unit


class HomeOpens:
    """A person opens Signoff's App Home: remember them (their Home is kept up to date from now on)
    and publish it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def opened(self, user_id: str, now: datetime) -> None:
        async with self.store.unit() as unit:
            await unit.open_home(user_id, now)
            await unit.enqueue(effects.publish_home(user_id, f"open:{uuid.uuid4().hex}", now))

def user_ids(entries: Iterable[str]) -> list[str]:
    """The Slack user ids among `entries` (user groups, S..., are not people)."""
    return [e for e in dict.fromkeys(entries) if is_user_id(e)]


async def republish_homes(unit: Unit, people: Iterable[str], key: str, now: datetime) -> None:
    """Enqueue a Home refresh, keyed `key`, for each of `people` who uses App Home."""
    await enqueue_homes(unit, await unit.home_users(user_ids(people)), key, now)


def home_items(home_user_ids: Iterable[str], key: str, now: datetime) -> list[OutboxItem]:
    """A Home refresh, keyed `key`, for each of these App Home users (in a stable order)."""
    return [effects.publish_home(user_id, key, now) for user_id in sorted(home_user_ids)]


def home_candidates(people: Iterable[str], key: str, now: datetime) -> list[tuple[str, OutboxItem]]:
    """(user id, Home refresh keyed `key`) for each of `people`, in `home_items`' order: the unit keeps
    those of people who have opened App Home (Unit.insert_pending)."""
    ids = sorted(user_ids(people))
    return list(zip(ids, home_items(ids, key, now), strict=True))


async def enqueue_homes(unit: Unit, home_user_ids: Iterable[str], key: str, now: datetime) -> None:
    """Enqueue a Home refresh, keyed `key`, for each of these App Home users."""
    for item in home_items(home_user_ids, key, now):
        await unit.enqueue(item)
