"""The reads behind AI notes and thread answers (bot/approvals/assist.py), on every backend: a tool's
approved requests in a window, newest first; the pending approval a card's thread belongs to."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.model import Action, Kind, Status
from storage.base import Store
from tests.storage.test_contract import T0, make_request


async def insert(store: Store, *requests: object) -> None:
    async with store.unit() as unit:
        for request in requests:
            await unit.insert_request(request)  # type: ignore[arg-type]


async def test_approved_of_tool_is_the_window_newest_first(store: Store) -> None:
    old = make_request("apr_old", status=Status.APPROVED, created_at=T0 - timedelta(days=40))
    first = make_request("apr_first", status=Status.APPROVED, created_at=T0 - timedelta(days=2))
    second = make_request("apr_second", status=Status.APPROVED, created_at=T0 - timedelta(days=1))
    rejected = make_request("apr_rejected", status=Status.REJECTED, created_at=T0 - timedelta(days=1))
    pending = make_request("apr_pending", created_at=T0 - timedelta(days=1))
    other = make_request("apr_other", status=Status.APPROVED, action=Action("db_exec", {}),
                         created_at=T0 - timedelta(days=1))
    await insert(store, old, first, second, rejected, pending, other)
    found = await store.approved_of_tool("send_email", since=T0 - timedelta(days=30), limit=10)
    assert [r.id for r in found] == ["apr_second", "apr_first"]
    assert [r.id for r in await store.approved_of_tool("send_email", since=T0 - timedelta(days=30), limit=1)] == [
        "apr_second"]
    assert await store.approved_of_tool("nothing", since=T0 - timedelta(days=30), limit=10) == []


async def test_pending_approval_by_card(store: Store) -> None:
    card = make_request("apr_card", card_channel="C1", card_ts="1700000000.000100")
    decided = make_request("apr_decided", status=Status.APPROVED, card_channel="C1", card_ts="1700000000.000200")
    question = make_request("qst_card", kind=Kind.QUESTION, card_channel="C1", card_ts="1700000000.000300")
    await insert(store, card, decided, question)
    found = await store.pending_approval_by_card("C1", "1700000000.000100")
    assert found is not None and found.id == "apr_card"
    assert await store.pending_approval_by_card("C2", "1700000000.000100") is None
    assert await store.pending_approval_by_card("C1", "1700000000.000200") is None  # decided
    assert await store.pending_approval_by_card("C1", "1700000000.000300") is None  # a question's: its answers
