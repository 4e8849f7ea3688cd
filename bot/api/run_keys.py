"""`POST /api/v1/runs` with an Idempotency-Key, and which token a run belongs to.

A key maps to a deterministic run id (a hash of the token-scoped key), so a retried POST can
never start a second run: the second insert fails on the primary key, and the run stored by the
first is returned (200) if it was started with the same body, else 409 idempotency_key_reused.
A run's owner is the token named in its `run_created` audit row.
"""

from __future__ import annotations

from aiohttp import web

from bot.agent.run_service import RunService
from bot.api import owners
from bot.domain.runs import NewRun, Run, run_id_for
from bot.errors import IdempotencyMismatch

__all__ = ["check_run_owner", "run_id_for", "start_once"]


def _same(run: Run, new: NewRun) -> bool:
    return (run.task, run.channel, run.agent, run.requested_by) == (new.task, new.channel, new.agent,
                                                                    new.requested_by)


async def start_once(runs: RunService, new: NewRun, *, owner: str, key: str | None) -> tuple[Run, bool]:
    """(the run, whether this call started it)."""
    if key is None:
        return await runs.start(new, owner=owner), True
    existing, started = await runs.start_keyed(new, key, owner=owner)
    if started:
        return existing, True
    if not _same(existing, new):
        raise IdempotencyMismatch("Idempotency-Key was already used for a different run")
    return existing, False


async def check_run_owner(request: web.Request, runs: RunService, run_id: str) -> None:
    if owners.token_of(request).admin:
        return
    events = await runs.service.reads.audit(run_id)
    owner = next((e.data.get(owners.OWNER) for e in events if e.type == "run_created"), None)
    owners.check(request, owner, "run", run_id)
