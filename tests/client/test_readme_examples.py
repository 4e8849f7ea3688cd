"""The integration pages' (docs/integrations/) examples, run as written against the test app: Python, the
hook's settings.json, the defer recipe, the SDK. (tests/client/test_docs_examples.py runs them
against `signoff demo`, as the pages say.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.model import message, text, tool_use
from tests.fakes.claude_api import FakeClaudeApi
from tests.support.app import API_TOKEN, App
from tests.client.claude_cli import ClaudeCli
from tests.support.docs import doc_example
from tests.support.waits import until
from tests.client.helpers import cards, pending_id


@pytest.fixture
def readme_app(app: App, monkeypatch: pytest.MonkeyPatch) -> App:
    """The app, with the README's channel and approver in Slack and its address in the environment."""
    app.slack.add_channel("C0123ABCD", "approvals")
    app.slack.add_user("U0123ALICE", "alice")
    monkeypatch.setenv("SIGNOFF_URL", app.url)
    monkeypatch.setenv("SIGNOFF_TOKEN", API_TOKEN)
    monkeypatch.setenv("SIGNOFF_CHANNEL", "C0123ABCD")
    return app


def cli_for(app: App, model: FakeClaudeApi, tmp_path: Path) -> ClaudeCli:
    return ClaudeCli(model, tmp_path, {"SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN,
                                       "SIGNOFF_CHANNEL": "C0123ABCD"})


async def test_python_client_example(readme_app: App) -> None:
    printed: list[str] = []
    namespace: dict[str, Any] = {"print": lambda *a: printed.append(" ".join(map(str, a)))}
    running = asyncio.create_task(asyncio.to_thread(exec, doc_example("python-client"), namespace))
    request_id = await pending_id(readme_app)
    await readme_app.click(request_id, "U0123ALICE", user_name="alice")
    await running
    assert printed == ["sent to customer@example.com: Your refund"]  # the example's send_email ran


async def test_require_approval_example(readme_app: App) -> None:
    printed: list[str] = []
    namespace: dict[str, Any] = {"print": lambda *a: printed.append(" ".join(map(str, a)))}
    running = asyncio.create_task(asyncio.to_thread(exec, doc_example("require-approval"), namespace))
    request_id = await pending_id(readme_app)
    _, body = await readme_app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["summary"] == "Refund 40 USD to customer@example.com"
    assert body["action"]["params_schema"]["properties"]["amount"] == {"type": "integer"}
    await readme_app.click(request_id, "U1", user_name="alice")
    await running
    assert printed == ["refunded 40 USD to customer@example.com"]


async def test_hook_settings_example(readme_app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = cli_for(readme_app, model, tmp_path)
    (cli.work / ".claude").mkdir()
    (cli.work / ".claude" / "settings.json").write_text(doc_example("claude-settings"))
    target = cli.work / "CHANGELOG.md"
    model.script(message(tool_use("Bash", {"command": f"echo '## 2.0' > {target}", "description": "Start the log"},
                                  id="toolu_readme_bash")),
                 message(text("Started.")))
    running = asyncio.create_task(cli.run("start the changelog"))
    request_id = await pending_id(readme_app)
    _, body = await readme_app.api("GET", f"/api/v1/approvals/{request_id}")
    assert body["action"]["name"] == "Bash" and "Start the log" in body["preview"]["text"]
    await readme_app.click(request_id, "U1", user_name="alice")
    result = await running
    assert result["result"] == "Started.", result
    assert target.read_text() == "## 2.0\n"


async def test_defer_recipe_example(readme_app: App, model: FakeClaudeApi, tmp_path: Path) -> None:
    cli = cli_for(readme_app, model, tmp_path)
    target = cli.work / "CHANGELOG.md"
    model.script(message(tool_use("Write", {"file_path": str(target), "content": "## 2.0\n- faster\n"},
                                  id="toolu_readme_defer")),
                 message(text("Changelog updated.")))
    running = asyncio.create_task(cli.shell(doc_example("claude-defer")))
    request_id = await pending_id(readme_app)
    run_json = cli.work / "run.json"
    # The hook waits its 5 s, then the run stops with the call deferred.
    await until(lambda: run_json.exists() and "tool_deferred" in run_json.read_text(), "the run to defer the call",
                timeout=60)
    assert not target.exists()
    await readme_app.click(request_id, "U0123ALICE", user_name="alice")  # `signoff wait` returns; the loop resumes
    code, out, err = await running
    assert code == 0, (out, err)
    assert json.loads(run_json.read_text())["terminal_reason"] == "completed"
    assert target.read_text() == "## 2.0\n- faster\n"
    assert cards(readme_app.slack) == 1


async def test_agent_sdk_example(readme_app: App, model: FakeClaudeApi, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cli = cli_for(readme_app, model, tmp_path)
    for name, value in cli.env().items():  # the SDK's CLI inherits this process's environment
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(cli.work)
    plan = cli.work / "plan.md"
    model.script(message(tool_use("Write", {"file_path": str(plan), "content": "1. ship\n"}, id="toolu_readme_sdk")),
                 message(text("Planned.")))
    namespace: dict[str, Any] = {"print": lambda *a: None}
    exec(doc_example("claude-sdk"), namespace)
    running = asyncio.create_task(namespace["main"]())
    request_id = await pending_id(readme_app)
    await readme_app.click(request_id, "U0123ALICE", user_name="alice")
    await running
    assert plan.read_text() == "1. ship\n"
