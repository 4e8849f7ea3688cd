"""Shared steps of the issue-12 scenario tests (quorum, duties, confirmation, batches)."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from storage.schema import votes
from tests.harness import App


async def settle(app: App) -> None:
    assert app.signoff is not None
    await app.signoff.dispatcher.drain()


async def snapshot(app: App, request_id: str) -> tuple[Any, ...]:
    """Everything stored about a request, to prove a refused click or submission wrote nothing."""
    assert app.signoff is not None
    store = app.signoff.store
    return (await store.get_request(request_id), await store.audit_events(request_id),
            await store.outbox_items(request_id), await vote_rows(app, request_id))


async def vote_rows(app: App, request_id: str) -> list[str]:
    """The voters stored in the votes table for a request."""
    assert app.signoff is not None
    async with app.signoff.store.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = await conn.execute(sa.select(votes.c.voter_id).where(votes.c.request_id == request_id))
        return sorted(r[0] for r in rows)


def ephemerals_to(app: App, user: str) -> list[str]:
    return [c.args["text"] for c in app.slack.calls_to("chat.postEphemeral") if c.args["user"] == user]


async def card_text(app: App, request_id: str) -> str:
    card = await app.card(request_id)
    return json.dumps(app.slack.messages[(card.channel, card.ts)].blocks, ensure_ascii=False)


def has_buttons(app: App, channel: str, ts: str) -> bool:
    return any(b["type"] == "actions" for b in app.slack.messages[(channel, ts)].blocks)
