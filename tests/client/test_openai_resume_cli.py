"""`signoff openai resume` as the OpenAI Agents SDK page runs it (docs/integrations/openai-agents.md): the
page's app pauses a run and exits; the page's resumer lines, started in the app's folder with no PYTHONPATH,
resume it once its card is decided, exactly once with two resumers at a time, woken by long-polls or by
Signoff's signed webhook, and print what they resumed."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from bench.harness import free_port
from bot.sandbox.signed import plain_input
from tests.client.helpers import pending_id, receipt
from tests.client.test_langgraph import decided, submit_modal
from tests.support.app import API_TOKEN, WEBHOOK_SECRET, App
from tests.support.docs import doc_example
from tests.support.process import LoggedProcess

RESUMED = "signoff openai resume: resumed run order-A-1042 (turn 1): send_email approved by alice"


@pytest.fixture
def folder(app: App, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The app's folder (the page's refunds_app.py in it) and what a terminal with the exports has."""
    (tmp_path / "refunds_app.py").write_text(doc_example("openai-resume-app"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_") and k != "PYTHONPATH"}
    env.update(SIGNOFF_URL=app.url, SIGNOFF_TOKEN=API_TOKEN, SIGNOFF_CHANNEL="C1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    return tmp_path, env


async def start_run(where: Path, env: dict[str, str]) -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "refunds_app.py", "order-A-1042", cwd=where, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert out.decode().startswith("order-A-1042: waiting for apr_")


def resumer(line: str, where: Path, env: dict[str, str], name: str) -> LoggedProcess:
    """The page's command line, run by the shell as written (exec: signals reach it)."""
    return LoggedProcess(["sh", "-c", "exec " + line], env, where, where / f"{name}.log")


def sent(where: Path) -> list[str]:
    path = where / "sent.log"
    return path.read_text().splitlines() if path.exists() else []


async def test_two_resumers_resume_a_decided_run_once_with_the_edit_and_say_so(
        app: App, folder: tuple[Path, dict[str, str]]) -> None:
    where, env = folder
    await start_run(where, env)
    request_id = await pending_id(app)
    line = doc_example("openai-resume").splitlines()[0]
    resumers = [resumer(line, where, env, f"resumer-{n}") for n in range(2)]
    for each in resumers:
        each.launch()
    try:
        for each in resumers:
            await each.line("watching the runs in runs", timeout=120)  # `import agents` is slow on a busy machine
        await submit_modal(app, request_id, "signoff_edit", {"p:to": {"value": plain_input("customer@example.com")},
                                                             "p:subject": {"value": plain_input("Your refund of $40")}})
        await decided(app, request_id)
        await resumers[0].until(lambda: any("resumed run" in ln for r in resumers for ln in r.lines()),
                                "a resumer to resume the run", timeout=120)
        body = await receipt(app, request_id)  # reported before the resumer says it resumed
    finally:
        for each in resumers:
            each.stop()
    assert [each.proc.returncode for each in resumers if each.proc] == [0, 0]  # SIGTERM: a clean stop
    said = [ln for r in resumers for ln in r.lines() if "resumed run" in ln]
    assert said == [RESUMED + " with edits"]  # one resume, by one of the two
    assert sent(where) == ["customer@example.com: Your refund of $40"]
    assert body["outcome_status"] == "ran" and body["outcome"]["params"]["subject"] == "Your refund of $40"


@pytest.mark.settings(SIGNOFF_EGRESS_ALLOW="127.0.0.1")  # the resumer takes webhooks on loopback
async def test_the_webhook_line_is_woken_by_the_decision_not_by_its_scan(
        app: App, folder: tuple[Path, dict[str, str]]) -> None:
    where, env = folder
    port = free_port()
    hook = f"http://127.0.0.1:{port}/signoff/webhook"
    line = doc_example("openai-resume").splitlines()[1].replace("127.0.0.1:8377", f"127.0.0.1:{port}")
    env = {**env, "RESUMER_URL": hook, "SIGNOFF_WEBHOOK_SECRET": WEBHOOK_SECRET}
    await start_run(where, env)
    request_id = await pending_id(app)
    _, asked = await app.api("GET", f"/api/v1/approvals/{request_id}")
    assert asked["callback_url"] == hook and asked["session"] == "order-A-1042"
    woken = resumer(line + " --scan-every 60", where, env, "resumer")  # only a webhook wakes it within the test
    woken.launch()
    try:
        await woken.line(f"woken by webhooks at {hook}", timeout=120)
        await app.click(request_id, "U1", user_name="alice")
        await woken.line(RESUMED, timeout=30)
    finally:
        woken.stop()
    assert sent(where) == ["customer@example.com: Your refund"]
    assert (await receipt(app, request_id))["outcome_status"] == "ran"


async def test_a_bad_agent_spec_says_why_and_exits_2(folder: tuple[Path, dict[str, str]]) -> None:
    where, env = folder
    proc = await asyncio.create_subprocess_exec("signoff", "openai", "resume", "--agent", "refunds_app:nobody",
                                                cwd=where, env=env, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 2 and "refunds_app has no nobody" in err.decode()
