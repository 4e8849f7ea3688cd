"""Everything Signoff acks is stored first: a click, a form answer, a command or an event is one
`slack_received` row, committed before Slack gets the ack, and handled after it.

Listeners ack at once and work afterwards (bot/process/slack_endpoint.py), so a process that died in a burst of
clicks used to lose the clicks whose work had not started, although the people had seen them taken
(Slack never sends an interactive payload again). Now:

- `accept` stores the raw body (group commit: the inputs that arrive together share one transaction,
  so a burst costs a few commits, not one per click) under Slack's own id for it: an event's
  `event_id`, an interaction's or a command's `trigger_id`. A key stored before is a duplicate (Slack's
  retry of an event): acked, not handled again.
- The process that stored a row holds it (a lease, renewed while its work waits or runs) and marks it
  done once its listener returned (`held`). A listener's failure is told to the person as before
  (bot/slack/listener_errors.py) and the row is done: a replay would not fare better.
- Rows whose lease ran out (their process was killed) are claimed by any process (one guarded write
  per row: one winner) and replayed through the same listeners (`replay`), with `REPLAYING` set so
  that a click whose decision had committed before the crash does not tell its clicker "already
  approved by you". A decision is never written twice either way: a replayed click meets the request
  decided (the version guard) and writes nothing; cards and webhooks go out with the decision only.
- A row that fails to replay `MAX_ATTEMPTS` times is given up, with an ERROR line naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from slack_bolt.request.async_request import AsyncBoltRequest

from bot.slack.form import parse_body
from bot.approvals.received import Inputs, Received

log = logging.getLogger(__name__)
T = TypeVar("T")

REPLAYING: contextvars.ContextVar[bool] = contextvars.ContextVar("signoff_replaying", default=False)
MAX_ATTEMPTS = 100  # claims, not failures: a process killed while replaying a row counts one too
KEEP_DONE = timedelta(hours=1)  # long enough to recognise Slack's retries of an event (minutes)
PRUNE_EVERY_SECONDS = 300.0


def key_of(body: dict[str, Any], raw: str) -> str:
    """Slack's id for this input: the same for a retry of it, another for anything else. `raw` is unused:
    two inputs with the same bytes and no id (a test's, not Slack's) are two inputs."""
    kind = str(body.get("type") or ("command" if "command" in body else "other"))
    if kind == "event_callback" and body.get("event_id"):
        return f"event:{body['event_id']}"
    trigger = body.get("trigger_id")
    if isinstance(trigger, str) and trigger:
        actions = body.get("actions")
        first = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
        return f"{kind}:{trigger}:{first.get('action_ts', '')}"[:200]
    return f"{kind}:{uuid.uuid4().hex}"  # Slack gave it no id (not an input Slack sends twice): never a duplicate


class Unavailable(Exception):
    """An input could not be stored (the database is away): Slack gets no ack for it."""


class SlackInbox:
    """`dispatch(request)` runs a stored input through the listeners (the `clicks` Bolt app)."""

    def __init__(self, inputs: Inputs, dispatch: Callable[[AsyncBoltRequest], Awaitable[Any]],
                 *, lease_seconds: float,
                 spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]) -> None:
        self.inputs = inputs
        self.dispatch = dispatch
        self.lease_seconds = lease_seconds
        self.spawn = spawn
        self.held: set[int] = set()
        self.replayed = 0
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def accept(self, body: dict[str, Any], raw: str, content_type: str) -> int | None:
        """Store one input (committed on return): its row id, or None if it was stored before.
        Raises `Unavailable` when it cannot be stored: then it must not be acked."""
        item = Received(key_of(body, raw), raw, content_type)
        try:
            new = await self.inputs.add(item)
        except Exception as exc:
            self._unreachable(exc)
            raise Unavailable from exc
        self._reachable()
        if not new:
            log.info("Slack sent %s again; it was handled already", item.key)
            return None
        assert item.id is not None
        self.held.add(item.id)
        return item.id

    def held_work(self, row_id: int, work: Callable[[], Awaitable[T]]) -> Callable[[], Coroutine[Any, Any, T]]:
        """`work`, then the row marked done."""
        async def run() -> T:
            try:
                return await work()
            finally:
                await self.done(row_id)
        return run

    async def done(self, row_id: int) -> None:
        """Marked with the next row stored (or by the loop): held, and its lease renewed, until then."""
        self.inputs.done_later(row_id)

    def marked(self, ids: Sequence[int]) -> None:
        self.held.difference_update(ids)

    # -- replays --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="signoff-slack-inbox")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.inputs.flush_done()
        except Exception:  # the database is away: those rows are replayed later, and write nothing new
            log.warning("stopping with %d handled Slack inputs not marked done", self.inputs.unmarked)

    async def _loop(self) -> None:
        every = max(0.05, self.lease_seconds / 3)
        loop = asyncio.get_running_loop()
        pruned = -float("inf")
        while True:
            try:
                await self.inputs.flush_done()
                await self.inputs.renew(sorted(self.held))
                await self.replay_stale()
                if loop.time() - pruned > PRUNE_EVERY_SECONDS:
                    await self.inputs.prune(KEEP_DONE)
                    pruned = loop.time()
            except Exception as exc:
                self._unreachable(exc)
            else:
                self._reachable()
            await asyncio.sleep(every)

    def _unreachable(self, exc: Exception) -> None:
        if not self._failing:  # one line per outage, not one a click or a round
            first = str(exc).splitlines()[0] if str(exc) else ""
            log.error("Slack's requests cannot be stored: cannot reach the database (%s: %s); they are answered "
                      "503 (Slack shows the person an error) until it is back", type(exc).__name__, first[:300])
        self._failing = True

    def _reachable(self) -> None:
        if self._failing:
            log.warning("Slack's requests are stored again: the database is back")
        self._failing = False

    async def replay_stale(self) -> int:
        """Claim the rows whose process is gone, and run each through the listeners again."""
        rows = await self.inputs.claim_stale()
        for row in rows:
            assert row.id is not None
            self.held.add(row.id)
            if row.attempts > MAX_ATTEMPTS:
                log.error("gave up on a Slack input after %d tries (row %d, %s)", row.attempts - 1, row.id, row.key)
                await self.done(row.id)
                continue
            log.info("replaying a Slack input whose process stopped before handling it (row %d, %s)",
                     row.id, row.key)
            self.replayed += 1
            self.spawn(self.held_work(row.id, _bound(self._replay, row))())
        return len(rows)

    async def _replay(self, row: Received) -> None:
        body = parse_body(row.body, row.content_type)
        # Socket Mode's kind of request: Bolt checks no signature (it was checked when the row was
        # stored, and its timestamp is old now).
        request = AsyncBoltRequest(body=body, mode="socket_mode")
        token = REPLAYING.set(True)
        try:
            await self.dispatch(request)
        finally:
            REPLAYING.reset(token)


def _bound(replay: Callable[[Received], Awaitable[None]], row: Received) -> Callable[[], Awaitable[None]]:
    return lambda: replay(row)
