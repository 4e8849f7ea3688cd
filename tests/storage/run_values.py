"""Values and small steps the run-store contract suites share: runs, requests, executions, messages.

The suites import the run store's interface from here (through `backends.py`), so renaming its
module is a one-line change there.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from bot.domain.model import Action, Kind, Request, Risk, Status
from bot.domain.runs import ExecStatus, Gate, Run, RunMessage, RunStatus, ToolExecution
from tests.storage.backends import RunStore, RunUnit

__all__ = ["LEASE", "T0", "RunStore", "RunUnit", "execution", "get", "in_unit", "insert", "insert_requests",
           "keys_in_order", "make_request", "make_run", "message"]

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
LEASE = timedelta(seconds=30)
R = TypeVar("R")


def make_run(run_id: str | None = None, **changes: Any) -> Run:
    run = Run(id=run_id or f"run_{uuid.uuid4().hex[:20]}", status=RunStatus.RUNNING, task="Tidy the inbox",
              channel="C1", agent="default", created_at=T0, updated_at=T0)
    return run.evolve(**changes)


def make_request(kind: Kind = Kind.APPROVAL, **changes: Any) -> Request:
    request = Request(id=f"apr_{uuid.uuid4().hex[:20]}", kind=kind, status=Status.PENDING,
                      action=Action("send_email", {"to": "a@example.com"}), summary="Send an email",
                      risk=Risk.HIGH, channel="C1", created_at=T0, updated_at=T0)
    return request.evolve(**changes)


def execution(run: Run, tool_use_id: str, *, turn_seq: int = 1, position: int = 0, **changes: Any) -> ToolExecution:
    made = ToolExecution(run_id=run.id, tool_use_id=tool_use_id, turn_seq=turn_seq, position=position,
                         name="send_email", input={"to": "a@example.com"}, gate=Gate.ALLOW, status=ExecStatus.READY)
    return made.evolve(**changes)


def message(run: Run, seq: int, role: str = "assistant", text: str | None = None) -> RunMessage:
    content = [{"type": "text", "text": text or f"message {seq}"}]
    return RunMessage(run.id, seq, role, content, T0 + timedelta(seconds=seq))


async def insert(run_store: RunStore, *runs: Run) -> None:
    async with run_store.unit() as unit:
        for run in runs:
            await unit.insert_run(run)


async def insert_requests(run_store: RunStore, *requests: Request) -> None:
    async with run_store.unit() as unit:
        for request in requests:
            await unit.insert_request(request)


async def in_unit(run_store: RunStore, write: Callable[[RunUnit], Awaitable[R]]) -> R:
    """Run `write(unit)` in a unit of its own and return what it returned."""
    async with run_store.unit() as unit:
        return await write(unit)


async def get(run_store: RunStore, run_id: str) -> Run:
    run = await run_store.get_run(run_id)
    assert run is not None, run_id
    return run


def keys_in_order(value: Any) -> Any:
    if isinstance(value, dict):
        return [[k, keys_in_order(v)] for k, v in value.items()]
    if isinstance(value, list):
        return [keys_in_order(v) for v in value]
    return value
