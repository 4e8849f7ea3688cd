"""@require_approval: typed schema from the hints, runs with the approved (edited) arguments, or not at all."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from signoff import AsyncSignoffClient, Rejected, SignoffClient, require_approval
from bot.sandbox.signed import number_input, plain_input
from tests.support.app import API_TOKEN, App
from tests.client.helpers import pending_id


async def test_sync_function_runs_with_the_edited_arguments(app: App) -> None:
    ran: list[tuple[str, int, str]] = []

    @require_approval(risk="high", summary="Refund {amount} to {to}", channel="C1", approvers=["U1"],
                      client=SignoffClient(app.url, API_TOKEN),
                      preview=lambda to, amount, tier: {"kind": "markdown", "text": f"Refund *{amount}* to {to}"})
    def refund(to: str, amount: int, tier: Literal["basic", "gold"] = "basic") -> str:
        ran.append((to, amount, tier))
        return f"refunded {amount}"

    assert refund.params_schema["properties"]["amount"] == {"type": "integer"}  # type: ignore[attr-defined]
    assert refund.params_schema["properties"]["tier"]["enum"] == ["basic", "gold"]  # type: ignore[attr-defined]
    calling = asyncio.create_task(asyncio.to_thread(refund, "a@example.com", 40))
    request_id = await pending_id(app)
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["summary"] == "Refund 40 to a@example.com" and body["action"]["name"] == "refund"
    assert body["action"]["params"] == {"to": "a@example.com", "amount": 40, "tier": "basic"}
    assert body["preview"] == {"kind": "markdown", "text": "Refund *40* to a@example.com"}
    await app.click(request_id, "U1", action="signoff_edit", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_edit",
        private_metadata=opened.args["view"]["private_metadata"],
        values={"p:amount": {"value": number_input("45")}, "p:to": {"value": plain_input("b@example.com")}})
    assert await calling == "refunded 45"
    assert ran == [("b@example.com", 45, "basic")]


async def test_async_function_rejected_never_runs(app: App) -> None:
    ran: list[str] = []

    @require_approval(summary=lambda path: f"Delete {path}", channel="C1",
                      client=AsyncSignoffClient(app.url, API_TOKEN))
    async def delete(path: str) -> None:
        ran.append(path)

    calling = asyncio.create_task(delete("/tmp/x"))
    request_id = await pending_id(app)
    await app.click(request_id, "U1", action="signoff_reject", user_name="alice")
    [opened] = await app.slack.wait_for("views.open")
    await app.slack_client.view_submission(
        user="U1", user_name="alice", callback_id="signoff_reject",
        private_metadata=opened.args["view"]["private_metadata"], values={"reason": {"value": plain_input("keep it")}})
    with pytest.raises(Rejected, match="keep it"):
        await calling
    assert ran == []


def test_functions_whose_arguments_cannot_be_reviewed_are_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"\*args"):
        @require_approval()
        def anything(*args: str) -> None: ...
