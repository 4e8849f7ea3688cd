"""Rows <-> domain objects for the SQL store: the request select (with its decision) and the
column sets each kind of write touches."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from bot.domain.model import (
    Action,
    Actor,
    Change,
    Decision,
    Kind,
    Outcome,
    Preview,
    Request,
    Risk,
    Status,
    Via,
)
from bot.domain.batch import items_from_json, items_json
from bot.domain.timing import TimerState, Timing
from bot.domain.votes import votes_from_json, votes_json
from bot.domain.outbox import OutboxItem
from storage.schema import decisions, requests

REQUEST_JOIN = requests.outerjoin(decisions, decisions.c.request_id == requests.c.id)
REQUEST_COLUMNS = [*requests.c, *[c.label(f"d_{c.name}") for c in decisions.c]]
SELECT_REQUEST = sa.select(*REQUEST_COLUMNS).select_from(REQUEST_JOIN)
# Built once: the hottest read (every click and card update) need not rebuild and re-key its statement.
REQUEST_BY_ID = SELECT_REQUEST.where(requests.c.id == sa.bindparam("request_id"))


class _Mapped:
    """What request_from_row reads of a row: its `_mapping`."""

    __slots__ = ("_mapping",)

    def __init__(self, mapping: dict[str, Any]) -> None:
        self._mapping = mapping


class DriverStatement:
    """A Core statement as driver SQL for one dialect: its text, its positional parameters from named
    values (each through its bind processor; the statement's own constants as compiled), and a
    returned row mapped as SQLAlchemy maps it (each column's own result processor, the engine's JSON
    deserializer included)."""

    def __init__(self, stmt: Any, dialect: Dialect) -> None:
        self.dialect = dialect  # held: the caches key on id(dialect), which must not be reused meanwhile
        compiled = stmt.compile(dialect=dialect)
        self.sql = str(compiled)
        self._order = tuple(compiled.positiontup or ())
        self._constants = compiled.params
        self._binds = compiled._bind_processors
        columns = list(stmt.exported_columns)
        self.names = tuple(c.name for c in columns)
        self.processors: tuple[Any, ...] = tuple(c.type._cached_result_processor(dialect, None) for c in columns)

    def params(self, values: dict[str, Any]) -> tuple[Any, ...]:
        out = []
        for name in self._order:
            value = values[name] if name in values else self._constants[name]
            bind = self._binds.get(name)
            out.append(bind(value) if bind is not None else value)
        return tuple(out)

    def values(self, row: Any) -> tuple[Any, ...]:
        """The driver's row's values as SQLAlchemy returns them, in order (names may repeat: count, count)."""
        return tuple(v if p is None or v is None else p(v) for v, p in zip(row, self.processors, strict=True))

    def mapped(self, row: Any) -> Any:
        """The driver's row as a row whose `_mapping` is SQLAlchemy's."""
        return _Mapped(dict(zip(self.names, self.values(row), strict=True)))


class RequestRead(DriverStatement):
    """REQUEST_BY_ID for one dialect as driver SQL, and a Request from the driver's row that equals
    what SQLAlchemy maps (tests/storage/test_sqlite_fast.py)."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__(REQUEST_BY_ID, dialect)

    def request(self, row: Any) -> Request:
        return request_from_row(self.mapped(row))


_READS: dict[int, RequestRead] = {}
_STATEMENTS: dict[tuple[int, int], DriverStatement] = {}


def driver_statement(stmt: Any, dialect: Dialect) -> DriverStatement:
    """`stmt` (built once, kept for the process's life) as driver SQL for `dialect`, compiled once."""
    key = (id(stmt), id(dialect))
    found = _STATEMENTS.get(key)
    if found is None:
        found = _STATEMENTS[key] = DriverStatement(stmt, dialect)
    return found


def request_read(dialect: Dialect) -> RequestRead:
    found = _READS.get(id(dialect))
    if found is None:
        found = _READS[id(dialect)] = RequestRead(dialect)
    return found


def request_from_row(row: Any) -> Request:
    m = row._mapping
    decision = None
    if m["d_outcome"] is not None:
        decided_by = Actor(m["d_decided_by_id"], m["d_decided_by_name"]) if m["d_decided_by_id"] else None
        decision = Decision(
            outcome=Outcome(m["d_outcome"]),
            params=m["d_params"],
            changes=tuple(Change(c["field"], c.get("from"), c.get("to")) for c in m["d_changes"]),
            comment=m["d_comment"],
            decided_by=decided_by,
            decided_at=m["d_decided_at"],
            via=Via(m["d_via"]),
            votes=votes_from_json(m["d_votes"]),
            params_sha256=m["d_params_sha256"],
            items=items_from_json(m["d_items"]),
        )
    preview = Preview(m["preview"]["kind"], m["preview"]["data"]) if m["preview"] else None
    return Request(
        id=m["id"],
        kind=Kind(m["kind"]),
        status=Status(m["status"]),
        version=m["version"],
        action=Action(m["action_name"], m["params"], m["params_schema"]),
        summary=m["summary"],
        context=m["context"],
        preview=preview,
        risk=Risk(m["risk"]),
        channel=m["channel"],
        approvers=tuple(m["approvers"]),
        callback_url=m["callback_url"],
        requested_by=m["requested_by"],
        card_channel=m["card_channel"],
        card_ts=m["card_ts"],
        thread_ts=m["thread_ts"],
        idempotency_key=m["idempotency_key"],
        body_hash=m["body_hash"],
        extra=m["extra"] or {},
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        next_due_at=m["next_due_at"],
        decision=decision,
        timing=Timing.from_json(m["timing"]) if m["timing"] else None,
        timers=timers_from_row(m) if m["timing"] or m["escalation"] else None,
        card_permalink=m["card_permalink"],
        quorum=m["quorum"],
        requester_may_approve=bool(m["requester_may_approve"]),
        confirm=m["confirm"],
        requester_user=m["requester_user"],
        votes=votes_from_json(m["votes"]),
        items=items_from_json(m["items"]),
        undo_until=m["undo_until"],
        first_viewed_at=m["first_viewed_at"],
    )


def timers_from_row(m: Any) -> TimerState:
    return state_from_columns(
        reminders_sent=m["reminders_sent"],
        remind_at=m["remind_at"],
        loop=m["escalation_loop"],
        level=m["escalation_level"],
        escalate_at=m["escalate_at"],
        expires_at=m["expires_at"],
        snoozed_until=m["snoozed_until"],
        escalation=m["escalation"],
    )


def timer_columns(r: Request) -> dict[str, Any]:
    t = r.timers or TimerState()
    return {
        "reminders_sent": t.reminders_sent,
        "remind_at": t.remind_at,
        "escalation_loop": t.loop,
        "escalation_level": t.level,
        "escalate_at": t.escalate_at,
        "expires_at": t.expires_at,
        "snoozed_until": t.snoozed_until,
        "escalation": escalation_json(t),
    }


def mutable_columns(r: Request) -> dict[str, Any]:
    return {
        "status": r.status.value,
        "card_channel": r.card_channel,
        "card_ts": r.card_ts,
        "thread_ts": r.thread_ts,
        "approvers": list(r.approvers),
        "extra": r.extra,
        "updated_at": r.updated_at,
        "next_due_at": r.next_due_at,
        "votes": votes_json(r.votes) if r.votes else None,
        "items": items_json(r.items),
        "undo_until": r.undo_until,
        **timer_columns(r),
    }


def outbox_from_row(row: Any) -> OutboxItem:
    m = row._mapping
    return OutboxItem(
        id=m["id"],
        kind=m["kind"],
        dedupe_key=m["dedupe_key"],
        payload=m["payload"],
        request_id=m["request_id"],
        status=m["status"],
        attempts=m["attempts"],
        failures=m["failures"],
        next_attempt_at=m["next_attempt_at"],
        last_error=m["last_error"],
        created_at=m["created_at"],
    )


def escalation_json(state: TimerState) -> dict[str, Any] | None:
    """TimerState's non-scalar part, as stored in the `escalation` JSON column."""
    if not state.escalated and not state.escalated_to:
        return None
    return {
        "count": state.escalations,
        "to": list(state.escalated_to),
        "from": list(state.escalated_from),
        "by": state.escalated_by,
        "note": state.note,
        "handed_back": state.handed_back,
        "approvers_seen": list(state.approvers_seen),
    }


def state_from_columns(
    *,
    reminders_sent: int,
    remind_at: datetime | None,
    loop: int,
    level: int,
    escalate_at: datetime | None,
    expires_at: datetime | None,
    snoozed_until: datetime | None,
    escalation: dict[str, Any] | None,
) -> TimerState:
    moves = escalation or {}
    return TimerState(
        reminders_sent=reminders_sent,
        remind_at=remind_at,
        loop=loop,
        level=level,
        escalate_at=escalate_at,
        expires_at=expires_at,
        snoozed_until=snoozed_until,
        escalations=int(moves.get("count", 0)),
        escalated_to=tuple(moves.get("to", ())),
        escalated_from=tuple(moves.get("from", ())),
        escalated_by=moves.get("by"),
        note=moves.get("note"),
        handed_back=bool(moves.get("handed_back", False)),
        approvers_seen=tuple(moves.get("approvers_seen", ())),
    )
