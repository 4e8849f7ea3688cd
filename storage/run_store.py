"""Storage of agent runs, behind its own interface, on the same engines as `SqlStore`.

A `RunUnit` is a `Unit` (one transaction) that can also write runs, so a run step and the
approval requests it creates commit together. Who may write a run's loop state is settled
by a lease: `claim` takes it, `fence` (first statement of every runner unit) proves we still
hold it and extends it, `release` gives it back. A process that dies keeps its lease until
`lease_until`, after which `recoverable` lists the run for any process to pick up.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.domain.runs import ExecStatus, Gate, Intervention, Phase, Run, RunMessage, RunStatus, ToolExecution
from storage.base import Unit
from storage.runs_schema import run_interventions, run_messages, runs, slack_events, tool_executions
from storage.schema import requests
from storage.sql import SqlStore, SqlUnit

_ACTIVE = (RunStatus.RUNNING.value, RunStatus.WAITING.value)


class RunUnit(Unit):
    """One transaction over requests *and* runs."""

    enqueued: int  # outbox items written in this unit so far

    @abc.abstractmethod
    async def insert_run(self, run: Run) -> None: ...

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> Run | None: ...

    @abc.abstractmethod
    async def fence(self, run_id: str, owner: str, until: datetime) -> bool:
        """True (and the lease extended to `until`) if `owner` still holds the run's lease."""

    @abc.abstractmethod
    async def save_run(self, run: Run) -> None:
        """Write the loop's own columns (status, phase, counters, result). Call after `fence`."""

    @abc.abstractmethod
    async def set_root(self, run_id: str, ts: str) -> bool:
        """Store the root message's ts once; False if it was already stored."""

    @abc.abstractmethod
    async def request_cancel(self, run_id: str, by: str | None) -> bool:
        """Ask the run to stop at its next step boundary; False if it already ended."""

    @abc.abstractmethod
    async def fail_unstarted(self, run_id: str, error: str, now: datetime) -> bool:
        """Fail a run whose root message could not be posted (nobody runs it yet)."""

    @abc.abstractmethod
    async def reopen(self, run_id: str, *, retries: int, step_limit: int | None, now: datetime) -> bool:
        """A failed run goes on (a person took it over): only from `failed`, with `retries` the number it
        had when they looked (so two clicks reopen it once). False: it was not so."""

    @abc.abstractmethod
    async def close_failed(self, run_id: str, by: str | None, now: datetime) -> bool:
        """A failed run is given up by a person: `failed` -> `cancelled`. False: it was not failed."""

    @abc.abstractmethod
    async def append_messages(self, messages: Sequence[RunMessage]) -> None: ...

    @abc.abstractmethod
    async def insert_executions(self, executions: Sequence[ToolExecution]) -> None: ...

    @abc.abstractmethod
    async def update_execution(self, execution: ToolExecution, *, expected: ExecStatus) -> bool:
        """Write `execution` if its stored status is still `expected` (guarded transition)."""

    @abc.abstractmethod
    async def add_intervention(self, intervention: Intervention) -> None: ...

    @abc.abstractmethod
    async def take_interventions(self, run_id: str, seq: int) -> list[Intervention]:
        """The queued interventions, oldest first, marked as delivered in message `seq` (each taken once)."""

    @abc.abstractmethod
    async def first_time(self, event_id: str, now: datetime) -> bool:
        """Record a Slack event id; False if it was seen before (Slack retries)."""


class RunStore(abc.ABC):
    @abc.abstractmethod
    def unit(self) -> AbstractAsyncContextManager[RunUnit]: ...

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> Run | None: ...

    @abc.abstractmethod
    async def ended(self, run_ids: Sequence[str]) -> list[str]:
        """Those of `run_ids` whose run has ended (completed, failed or cancelled)."""

    @abc.abstractmethod
    async def messages(self, run_id: str, *, after_seq: int = -1) -> list[RunMessage]: ...

    @abc.abstractmethod
    async def executions(self, run_id: str, *, turn_seq: int | None = None) -> list[ToolExecution]: ...

    @abc.abstractmethod
    async def find_run_by_root(self, channel: str, ts: str) -> Run | None: ...

    @abc.abstractmethod
    async def open_requests(self, run_id: str, *, gate: Gate | None = None) -> list[str]:
        """Pending approval/question requests created by the run's tool calls, oldest first."""

    @abc.abstractmethod
    async def pending_question_by_card(self, channel: str, ts: str) -> str | None: ...

    @abc.abstractmethod
    async def interventions(self, run_id: str) -> list[Intervention]: ...

    @abc.abstractmethod
    async def has_interventions(self, run_id: str) -> bool:
        """True if thread messages wait to be given to the model."""

    @abc.abstractmethod
    async def claim(self, run_id: str, owner: str, now: datetime, until: datetime) -> bool:
        """Take the run's lease if it is free or expired and the run has not ended."""

    @abc.abstractmethod
    async def release(self, run_id: str, owner: str) -> None: ...

    @abc.abstractmethod
    async def recoverable(self, now: datetime, *, limit: int) -> list[str]:
        """Unleased (or expired) runs with work to do: running, cancel asked, or all decided."""

    @abc.abstractmethod
    async def next_lease_expiry(self, *, after: datetime) -> datetime | None:
        """When the soonest lease still held after `after` lapses (a lease that already lapsed was
        looked at by the sweep that saw it lapse: a run waiting on a person is not recoverable)."""

    @abc.abstractmethod
    async def forget_events(self, *, before: datetime) -> int:
        """Drop processed Slack event ids received before `before` (Slack stopped retrying them)."""


# --------------------------------------------------------------------------- rows


def _run_from_row(row: Any) -> Run:
    m = row._mapping
    return Run(
        id=m["id"], status=RunStatus(m["status"]), phase=Phase(m["phase"]), task=m["task"], channel=m["channel"],
        agent=m["agent"], requested_by=m["requested_by"], root_ts=m["root_ts"], step_count=m["step_count"],
        next_seq=m["next_seq"], turn_seq=m["turn_seq"], version=m["version"],
        cancel_requested=bool(m["cancel_requested"]), cancelled_by=m["cancelled_by"], result=m["result"],
        error=m["error"], failed_steps=m["failed_steps"], step_limit=m["step_limit"], retries=m["retries"],
        lease_owner=m["lease_owner"], lease_until=m["lease_until"], created_at=m["created_at"],
        updated_at=m["updated_at"],
    )


def _loop_columns(run: Run) -> dict[str, Any]:
    return {
        "status": run.status.value, "phase": run.phase.value, "step_count": run.step_count,
        "next_seq": run.next_seq, "turn_seq": run.turn_seq, "result": run.result, "error": run.error,
        "failed_steps": run.failed_steps, "updated_at": run.updated_at,
    }


def _execution_from_row(row: Any) -> ToolExecution:
    m = row._mapping
    return ToolExecution(
        run_id=m["run_id"], tool_use_id=m["tool_use_id"], turn_seq=m["turn_seq"], position=m["position"],
        name=m["name"], input=m["input"], gate=Gate(m["gate"]), risk=m["risk"], status=ExecStatus(m["status"]),
        request_id=m["request_id"], final_input=m["final_input"], note=m["note"], result=m["result"],
        is_error=bool(m["is_error"]), attempts=m["attempts"], started_at=m["started_at"],
        finished_at=m["finished_at"],
    )


def _execution_columns(e: ToolExecution) -> dict[str, Any]:
    return {
        "status": e.status.value, "request_id": e.request_id, "final_input": e.final_input, "note": e.note,
        "result": e.result, "is_error": e.is_error, "attempts": e.attempts, "started_at": e.started_at,
        "finished_at": e.finished_at,
    }


def _slack_order(intervention: Intervention) -> tuple[int, int, int]:
    """Sort key: Slack's ts ("seconds.micros", compared as numbers), then arrival (the row id)."""
    seconds, _, micros = (intervention.slack_ts or "").partition(".")
    if not seconds.isdigit():
        return (1 << 62, 0, intervention.id or 0)
    return (int(seconds), int(micros) if micros.isdigit() else 0, intervention.id or 0)


def _intervention_from_row(row: Any) -> Intervention:
    m = row._mapping
    return Intervention(
        id=m["id"], run_id=m["run_id"], text=m["text"], user_id=m["user_id"], user_name=m["user_name"],
        slack_ts=m["slack_ts"], consumed_seq=m["consumed_seq"], created_at=m["created_at"],
    )


# --------------------------------------------------------------------------- SQL


class SqlRunUnit(SqlUnit, RunUnit):
    async def insert_run(self, run: Run) -> None:
        await self.conn.execute(runs.insert().values(
            id=run.id, task=run.task, channel=run.channel, agent=run.agent, requested_by=run.requested_by,
            root_ts=run.root_ts, version=run.version, cancel_requested=run.cancel_requested,
            cancelled_by=run.cancelled_by, created_at=run.created_at, **_loop_columns(run),
        ))

    async def get_run(self, run_id: str) -> Run | None:
        row = (await self.conn.execute(sa.select(runs).where(runs.c.id == run_id))).first()
        return _run_from_row(row) if row else None

    async def fence(self, run_id: str, owner: str, until: datetime) -> bool:
        stmt = runs.update().where(runs.c.id == run_id, runs.c.lease_owner == owner).values(lease_until=until)
        return (await self.conn.execute(stmt)).rowcount == 1

    async def save_run(self, run: Run) -> None:
        stmt = runs.update().where(runs.c.id == run.id).values(version=runs.c.version + 1, **_loop_columns(run))
        await self.conn.execute(stmt)
        if run.status.is_final:  # long-polls on the run in other processes wake at commit
            await self.notify(run.id)

    async def set_root(self, run_id: str, ts: str) -> bool:
        stmt = runs.update().where(runs.c.id == run_id, runs.c.root_ts.is_(None)).values(
            root_ts=ts, version=runs.c.version + 1)
        return (await self.conn.execute(stmt)).rowcount == 1

    async def request_cancel(self, run_id: str, by: str | None) -> bool:
        stmt = runs.update().where(
            runs.c.id == run_id, runs.c.status.in_(_ACTIVE), runs.c.cancel_requested == sa.false()
        ).values(cancel_requested=True, cancelled_by=by, version=runs.c.version + 1)
        return (await self.conn.execute(stmt)).rowcount == 1

    async def fail_unstarted(self, run_id: str, error: str, now: datetime) -> bool:
        stmt = runs.update().where(
            runs.c.id == run_id, runs.c.root_ts.is_(None), runs.c.lease_owner.is_(None), runs.c.status.in_(_ACTIVE)
        ).values(status=RunStatus.FAILED.value, error=error, updated_at=now, version=runs.c.version + 1)
        failed = (await self.conn.execute(stmt)).rowcount == 1
        if failed:
            await self.notify(run_id)
        return failed

    async def reopen(self, run_id: str, *, retries: int, step_limit: int | None, now: datetime) -> bool:
        stmt = runs.update().where(
            runs.c.id == run_id, runs.c.status == RunStatus.FAILED.value, runs.c.retries == retries,
            runs.c.root_ts.is_not(None),
        ).values(status=RunStatus.RUNNING.value, error=None, step_limit=step_limit, retries=retries + 1,
                 cancel_requested=False, updated_at=now, version=runs.c.version + 1)
        return (await self.conn.execute(stmt)).rowcount == 1

    async def close_failed(self, run_id: str, by: str | None, now: datetime) -> bool:
        stmt = runs.update().where(runs.c.id == run_id, runs.c.status == RunStatus.FAILED.value).values(
            status=RunStatus.CANCELLED.value, cancelled_by=by, updated_at=now, version=runs.c.version + 1)
        return (await self.conn.execute(stmt)).rowcount == 1

    async def append_messages(self, messages: Sequence[RunMessage]) -> None:
        if messages:
            await self.conn.execute(run_messages.insert(), [
                {"run_id": m.run_id, "seq": m.seq, "role": m.role, "content": m.content, "created_at": m.created_at}
                for m in messages
            ])

    async def insert_executions(self, executions: Sequence[ToolExecution]) -> None:
        if executions:
            await self.conn.execute(tool_executions.insert(), [
                {"run_id": e.run_id, "tool_use_id": e.tool_use_id, "turn_seq": e.turn_seq, "position": e.position,
                 "name": e.name, "input": e.input, "gate": e.gate.value, "risk": e.risk, **_execution_columns(e)}
                for e in executions
            ])

    async def update_execution(self, execution: ToolExecution, *, expected: ExecStatus) -> bool:
        stmt = tool_executions.update().where(
            tool_executions.c.run_id == execution.run_id,
            tool_executions.c.tool_use_id == execution.tool_use_id,
            tool_executions.c.status == expected.value,
        ).values(**_execution_columns(execution))
        return (await self.conn.execute(stmt)).rowcount == 1

    async def add_intervention(self, intervention: Intervention) -> None:
        i = intervention
        await self.conn.execute(run_interventions.insert().values(
            run_id=i.run_id, text=i.text, user_id=i.user_id, user_name=i.user_name, slack_ts=i.slack_ts,
            created_at=i.created_at,
        ))

    async def take_interventions(self, run_id: str, seq: int) -> list[Intervention]:
        # What this unit takes is what its guarded UPDATE marked, not what it read before: on
        # PostgreSQL a concurrent taker that read the same queue marks nothing and gets nothing.
        stmt = (
            run_interventions.update()
            .where(run_interventions.c.run_id == run_id, run_interventions.c.consumed_seq.is_(None))
            .values(consumed_seq=seq)
            .returning(*run_interventions.c)
        )
        taken = [_intervention_from_row(r) for r in (await self.conn.execute(stmt)).all()]
        # In the order people wrote them (Slack's ts), not the order their events were processed in.
        return sorted(taken, key=_slack_order)

    async def first_time(self, event_id: str, now: datetime) -> bool:
        stmt = self._insert_ignore(slack_events, {"event_id": event_id, "received_at": now}, "event_id")
        return (await self.conn.execute(stmt)).rowcount == 1


class SqlRunStore(RunStore):
    """Runs on the engines (and, for SQLite, the writer lock) of a `SqlStore`."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.engine = store.engine
        self._unit = store.units_of(SqlRunUnit)  # on the engine's own unit

    def unit(self) -> AbstractAsyncContextManager[SqlRunUnit]:
        return self.store.unit_of(self._unit)

    async def _all(self, stmt: Any) -> list[Any]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(stmt)).all())

    async def get_run(self, run_id: str) -> Run | None:
        rows = await self._all(sa.select(runs).where(runs.c.id == run_id))
        return _run_from_row(rows[0]) if rows else None

    async def ended(self, run_ids: Sequence[str]) -> list[str]:
        if not run_ids:
            return []
        final = [s.value for s in RunStatus if s.is_final]
        return [r.id for r in await self._all(sa.select(runs.c.id).where(runs.c.id.in_(run_ids),
                                                                         runs.c.status.in_(final)))]

    async def messages(self, run_id: str, *, after_seq: int = -1) -> list[RunMessage]:
        stmt = (sa.select(run_messages).where(run_messages.c.run_id == run_id, run_messages.c.seq > after_seq)
                .order_by(run_messages.c.seq))
        return [RunMessage(r.run_id, r.seq, r.role, r.content, r.created_at) for r in await self._all(stmt)]

    async def executions(self, run_id: str, *, turn_seq: int | None = None) -> list[ToolExecution]:
        stmt = sa.select(tool_executions).where(tool_executions.c.run_id == run_id)
        if turn_seq is not None:
            stmt = stmt.where(tool_executions.c.turn_seq == turn_seq)
        stmt = stmt.order_by(tool_executions.c.turn_seq, tool_executions.c.position)
        return [_execution_from_row(r) for r in await self._all(stmt)]

    async def find_run_by_root(self, channel: str, ts: str) -> Run | None:
        rows = await self._all(sa.select(runs).where(runs.c.channel == channel, runs.c.root_ts == ts))
        return _run_from_row(rows[0]) if rows else None

    async def open_requests(self, run_id: str, *, gate: Gate | None = None) -> list[str]:
        stmt = (
            sa.select(tool_executions.c.request_id)
            .select_from(tool_executions.join(requests, requests.c.id == tool_executions.c.request_id))
            .where(tool_executions.c.run_id == run_id, requests.c.status == "pending")
            .order_by(tool_executions.c.turn_seq, tool_executions.c.position)
        )
        if gate is not None:
            stmt = stmt.where(tool_executions.c.gate == gate.value)
        return [r.request_id for r in await self._all(stmt)]

    async def pending_question_by_card(self, channel: str, ts: str) -> str | None:
        stmt = sa.select(requests.c.id).where(
            requests.c.status == "pending", requests.c.kind == "question",
            requests.c.card_channel == channel, requests.c.card_ts == ts,
        )
        rows = await self._all(stmt)
        return rows[0].id if rows else None

    async def interventions(self, run_id: str) -> list[Intervention]:
        stmt = sa.select(run_interventions).where(run_interventions.c.run_id == run_id).order_by(
            run_interventions.c.id)
        return sorted((_intervention_from_row(r) for r in await self._all(stmt)), key=_slack_order)

    async def has_interventions(self, run_id: str) -> bool:
        stmt = sa.select(run_interventions.c.id).where(
            run_interventions.c.run_id == run_id, run_interventions.c.consumed_seq.is_(None)).limit(1)
        return bool(await self._all(stmt))

    async def claim(self, run_id: str, owner: str, now: datetime, until: datetime) -> bool:
        stmt = runs.update().where(
            runs.c.id == run_id, runs.c.status.in_(_ACTIVE),
            sa.or_(runs.c.lease_owner.is_(None), runs.c.lease_until < now),
        ).values(lease_owner=owner, lease_until=until)
        async with self.unit() as unit:
            return (await unit.conn.execute(stmt)).rowcount == 1

    async def release(self, run_id: str, owner: str) -> None:
        stmt = runs.update().where(runs.c.id == run_id, runs.c.lease_owner == owner).values(
            lease_owner=None, lease_until=None)
        async with self.unit() as unit:
            await unit.conn.execute(stmt)

    async def recoverable(self, now: datetime, *, limit: int) -> list[str]:
        undecided = (
            sa.select(tool_executions.c.run_id)
            .select_from(tool_executions.join(requests, requests.c.id == tool_executions.c.request_id))
            .where(tool_executions.c.run_id == runs.c.id, tool_executions.c.status == ExecStatus.WAITING.value,
                   requests.c.status == "pending")
        )
        stmt = (
            sa.select(runs.c.id)
            .where(
                runs.c.status.in_(_ACTIVE),
                sa.or_(runs.c.lease_owner.is_(None), runs.c.lease_until < now),
                sa.or_(
                    sa.and_(runs.c.status == RunStatus.RUNNING.value, runs.c.root_ts.is_not(None)),
                    runs.c.cancel_requested == sa.true(),
                    sa.and_(runs.c.status == RunStatus.WAITING.value, ~undecided.exists()),
                ),
            )
            .order_by(runs.c.updated_at)
            .limit(limit)
        )
        return [r.id for r in await self._all(stmt)]

    async def forget_events(self, *, before: datetime) -> int:
        async with self.unit() as unit:
            result = await unit.conn.execute(slack_events.delete().where(slack_events.c.received_at < before))
        return int(result.rowcount or 0)

    async def next_lease_expiry(self, *, after: datetime) -> datetime | None:
        stmt = sa.select(sa.func.min(runs.c.lease_until)).where(
            runs.c.status.in_(_ACTIVE), runs.c.lease_owner.is_not(None), runs.c.lease_until > after)
        async with self.engine.connect() as conn:
            expiry: datetime | None = (await conn.execute(stmt)).scalar()
        return expiry
