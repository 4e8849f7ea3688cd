"""Issue 33: one token cannot fill the queue: at most SIGNOFF_MAX_PENDING_PER_TOKEN pending requests each."""

from __future__ import annotations

import pytest

import asyncio
from typing import Any

from bot.sandbox import SlackEmulator
from tests.support.app import App, approval_body, start_app

pytestmark = pytest.mark.security

APPROVALS = "/api/v1/approvals"
TOKENS = "flood:flood-secret-1,calm:calm-secret-1"


async def submit(app: App, secret: str, key: str | None = None, **overrides: Any) -> tuple[int, dict[str, Any], Any]:
    headers = {"Authorization": f"Bearer {secret}", **({"Idempotency-Key": key} if key else {})}
    async with app.session.post(f"{app.url}{APPROVALS}", json=approval_body(**overrides), headers=headers) as answer:
        return answer.status, await answer.json(), answer.headers


async def pending_of(app: App, owner: str) -> int:
    assert app.signoff is not None
    return await app.signoff.store.count_pending(owner)


async def test_past_its_cap_a_token_gets_429_and_nothing_is_written_while_others_are_served(
        db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SIGNOFF_API_TOKENS=TOKENS, SIGNOFF_MAX_PENDING_PER_TOKEN="3")
    try:
        answers = [await submit(app, "flood-secret-1", key=f"k{n}", summary=f"Flood {n}") for n in range(4)]
        assert [a[0] for a in answers] == [201, 201, 201, 429]
        status, body, headers = answers[3]
        assert body["error"]["code"] == "too_many_pending"
        assert "3 requests waiting for a person" in body["error"]["message"]
        assert int(headers["Retry-After"]) >= 1
        assert await pending_of(app, "flood") == 3  # the 429 wrote nothing
        # A retry of a request it already made is answered (it takes no new slot) ...
        again = await submit(app, "flood-secret-1", key="k0", summary="Flood 0")
        assert again[0] == 200 and again[1]["id"] == answers[0][1]["id"]
        # ... another token has its own count ...
        assert (await submit(app, "calm-secret-1"))[0] == 201
        # ... and a request that leaves `pending` frees a slot.
        async with app.session.post(f"{app.url}{APPROVALS}/{answers[0][1]['id']}/cancel", json={},
                                    headers={"Authorization": "Bearer flood-secret-1"}) as cancelled:
            assert cancelled.status == 200, await cancelled.text()
        assert (await submit(app, "flood-secret-1", summary="After a cancel"))[0] == 201
        assert (await submit(app, "flood-secret-1", summary="Over again"))[0] == 429
    finally:
        await app.stop()


async def test_submits_at_once_never_pass_the_cap(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SIGNOFF_API_TOKENS=TOKENS, SIGNOFF_MAX_PENDING_PER_TOKEN="5")
    try:
        answers = await asyncio.gather(*(submit(app, "flood-secret-1", summary=f"Flood {n}") for n in range(20)))
        statuses = sorted(a[0] for a in answers)
        assert set(statuses) == {201, 429}
        created = statuses.count(201)
        assert 1 <= created <= 5  # submits in flight are counted: the cap errs on the safe side, never over
        assert await pending_of(app, "flood") == created
        while (await submit(app, "flood-secret-1", summary="One by one"))[0] == 201:
            pass
        assert await pending_of(app, "flood") == 5  # filled to the cap exactly, not past it
    finally:
        await app.stop()
