"""Outbox items for agent runs: post the root message, update it, post a note in the thread.

They carry the run id as `request_id`, so the dispatcher delivers one run's items in order.
The root message is rendered at delivery time from the run's latest state; notes carry
their rendered message (they never change).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from bot.domain.runs import Run
from storage.base import OutboxItem

POST_ROOT = "agent.post_root"
UPDATE_ROOT = "agent.update_root"
THREAD_NOTE = "agent.note"


def _item(kind: str, run_id: str, dedupe_key: str, now: datetime, **payload: Any) -> OutboxItem:
    return OutboxItem.due(kind, dedupe_key, now, ordered_by=run_id, payload={"run_id": run_id, **payload})


def post_root(run: Run, now: datetime) -> OutboxItem:
    return _item(POST_ROOT, run.id, f"run:{run.id}:root", now)


def update_root(run_id: str, now: datetime) -> OutboxItem:
    # Every change gets its own item; the message is rendered when it is delivered, so a late
    # or repeated update still shows the latest state.
    return _item(UPDATE_ROOT, run_id, f"run:{run_id}:root:{uuid.uuid4().hex}", now)


def note(run_id: str, key: str, message: dict[str, Any], now: datetime) -> OutboxItem:
    """A message in the run's thread; `key` makes it unique (the same key is posted once)."""
    return _item(THREAD_NOTE, run_id, f"run:{run_id}:note:{key}", now, message=message, key=key)
