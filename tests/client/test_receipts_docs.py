"""The examples of docs/receipts.md, run as pasted against the test app (the Claude Code settings one
runs in test_claude_code_receipts.py through the real CLI)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.docs import doc_example
from tests.client.helpers import next_pending, pending_id
from tests.support.app import API_TOKEN, App


@pytest.fixture
def docs_app(app: App, monkeypatch: pytest.MonkeyPatch) -> App:
    monkeypatch.setenv("SIGNOFF_URL", app.url)
    monkeypatch.setenv("SIGNOFF_TOKEN", API_TOKEN)
    monkeypatch.setenv("SIGNOFF_CHANNEL", "C1")
    return app


def run(name: str, printed: list[str]) -> Any:
    namespace: dict[str, Any] = {"print": lambda *a: printed.append(" ".join(map(str, a))),
                                 "__name__": "__main__"}
    return asyncio.create_task(asyncio.to_thread(exec, doc_example(name), namespace))


async def request(app: App, request_id: str) -> dict[str, Any]:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
    return dict(body)


async def test_the_client_example_reports_what_ran(docs_app: App) -> None:
    printed: list[str] = []
    running = run("receipts-client", printed)
    request_id = await pending_id(docs_app)
    await docs_app.click(request_id, "U1", user_name="alice")
    await running
    assert printed == ["refunded: r_c_42_40"]
    body = await request(docs_app, request_id)
    assert body["outcome_status"] == "ran" and body["outcome"]["result"] == {"refund_id": "r_c_42_40"}
    assert body["outcome"]["same_params"] is True


async def test_the_state_example_asks_again_when_the_file_changed(docs_app: App, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    prices = tmp_path / "prices.csv"
    prices.write_text("sku,price\nA,10\n")
    printed: list[str] = []
    running = run("receipts-state", printed)
    first = await pending_id(docs_app)
    prices.write_text("sku,price\nA,11\n")  # someone else's change while the card waits
    await docs_app.click(first, "U1", user_name="alice")
    second = await next_pending(docs_app, first)
    assert "A,11" in (await request(docs_app, second))["preview"]["before"]
    assert prices.read_text() == "sku,price\nA,11\n" and printed == []  # not written on the stale approval
    await docs_app.click(second, "U1", user_name="alice")
    await running
    assert prices.read_text() == "sku,price\nA,12\n" and printed == ["wrote 15 characters"]
    assert (await request(docs_app, first))["outcome_status"] == "skipped"
    assert (await request(docs_app, second))["outcome_status"] == "ran"
