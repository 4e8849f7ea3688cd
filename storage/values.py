"""The column values of the rows the SQL store writes, from domain objects (every write path builds
them here, so the generic inserts, the engines' writes (storage/sqlite/writes.py, storage/postgres/writes.py, storage/postgres/decide.py)
write the same values)."""

from __future__ import annotations

from typing import Any

from bot.domain.batch import items_json
from bot.domain.grants import OWNER_KEY
from bot.domain.model import AuditEvent, Decision, Request
from bot.domain.votes import votes_json
from bot.domain.outbox import OutboxItem
from storage.rows import mutable_columns


def request_values(request: Request) -> dict[str, Any]:
    """The requests row of a new request (insert_request; the engines' writes for a decided one)."""
    return {
        "id": request.id,
        "kind": request.kind.value,
        "version": request.version,
        "action_name": request.action.name,
        "params": request.action.params,
        "params_schema": request.action.params_schema,
        "summary": request.summary,
        "context": request.context,
        "preview": {"kind": request.preview.kind, "data": request.preview.data} if request.preview else None,
        "risk": request.risk.value,
        "channel": request.channel,
        "callback_url": request.callback_url,
        "requested_by": request.requested_by,
        "idempotency_key": request.idempotency_key,
        "body_hash": request.body_hash,
        "created_at": request.created_at,
        "timing": request.timing.to_json() if request.timing else None,
        "card_permalink": request.card_permalink,
        "quorum": request.quorum,
        "requester_may_approve": request.requester_may_approve,
        "confirm": request.confirm,
        "requester_user": request.requester_user,
        "owner": request.extra.get(OWNER_KEY),
        **mutable_columns(request),
    }


def decision_values(request_id: str, decision: Decision) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "outcome": decision.outcome.value,
        "params": decision.params,
        "changes": [c.to_json() for c in decision.changes],
        "comment": decision.comment,
        "decided_by_id": decision.decided_by.id if decision.decided_by else None,
        "decided_by_name": decision.decided_by.name if decision.decided_by else None,
        "decided_at": decision.decided_at,
        "via": decision.via.value,
        "votes": votes_json(decision.votes) if decision.votes else None,
        "params_sha256": decision.params_sha256,
        "items": items_json(decision.items),
    }


def outbox_values(item: OutboxItem) -> dict[str, Any]:
    return {
        "request_id": item.request_id,
        "kind": item.kind,
        "dedupe_key": item.dedupe_key,
        "payload": item.payload,
        "status": "pending",
        "attempts": 0,
        "failures": 0,
        "next_attempt_at": item.next_attempt_at or item.created_at,
        "created_at": item.created_at,
    }


def audit_values(event: AuditEvent) -> dict[str, Any]:
    return {"request_id": event.request_id, "type": event.type, "actor": event.actor, "data": event.data,
            "at": event.at}
