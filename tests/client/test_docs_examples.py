"""Every copy-paste example of the integration pages (docs/integrations/*.md), run the way the pages say:
`signoff demo` started from the installed console script, the three `export` lines it prints pasted
into the environment (with the venv's bin first on PATH, as `source .venv/bin/activate` puts it), the
example run as pasted, its card decided by a person on the sandbox page (its HTTP endpoints), and what
the example then prints or does checked, for an approval and for the not-approved path.

Examples that need a real Claude Code run (and so a model) are checked for the part a person pastes:
the hook command of a settings.json, fed the JSON Claude Code sends on stdin; the `mcp.json` server,
driven by the `mcp` client over stdio and streamable HTTP; the Agent SDK callback, called the way
the SDK calls it. (tests/client/test_docs_examples.py and test_claude_prompt_tool.py run
those through the real CLI against the test app.) The DBOS recipe runs in test_dbos.py, against the test
app (it kills and restarts a worker, on SQLite and PostgreSQL). A marked example that no test here runs fails the
first test; an example this file runs that the docs lost fails where it is read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.docs import DOCS, doc_example, doc_examples
from tests.sandbox.browser import DemoProcess, exported, start_demo
from tests.sandbox.person import SandboxPerson

VENV_BIN = Path(sys.executable).parent  # where `pip install -e .` put the `signoff` console script
RUNS = 60.0  # seconds an example may take once its card is decided (they take about one)

# Every example the pages mark, and the test below that runs it.
RUN_HERE = {
    "python-client": "test_the_client_example_sends_on_approval_and_says_why_not_otherwise",
    "require-approval": "test_the_decorated_function_runs_only_once_approved",
    "signoff-wait": "test_the_shell_recipe_deploys_only_when_signoff_wait_says_approved",
    "claude-http": "test_claude_hooks.test_edit_and_approve_in_slack_writes_the_edited_content",  # the real CLI, both hook kinds
    "claude-http-receipts": "test_claude_http_hook.test_post_tool_use_reports_what_ran_to_the_card_and_the_audit",
    "claude-settings": "test_the_settings_hooks_answer_claude_code_with_the_decision",
    "claude-permission-request": "test_the_settings_hooks_answer_claude_code_with_the_decision",
    "claude-defer": "test_the_settings_hooks_answer_claude_code_with_the_decision",
    "hook-by-hand": "test_the_hook_by_hand_prints_allow_once_approved",
    "claude-sdk": "test_the_agent_sdk_callback_allows_what_was_approved",
    "mcp-stdio": "test_the_mcp_configs_reach_the_sandbox_over_stdio_and_http",
    "mcp-http": "test_the_mcp_configs_reach_the_sandbox_over_stdio_and_http",
    "mcp-claude": "test_the_mcp_configs_reach_the_sandbox_over_stdio_and_http",
    "mcp-python": "test_the_mcp_python_example_lists_the_tools_and_gets_the_decision",
    # MCP elicitation's, in test_elicitation.py (the real CLI and mcp's own clients, against the test app):
    "claude-elicitation-http": "test_elicitation.test_the_real_cli_gets_the_form_answered_in_slack_over_the_http_hook",
    "claude-elicitation-command": "test_elicitation.test_the_real_cli_gets_the_form_answered_in_slack_over_the_command_hook",
    "mcp-elicitation-callback": "test_elicitation.test_the_docs_callback_answers_a_client_session_from_slack",
    # LangGraph's, in test_docs_examples_langgraph.py (with this file's sandbox):
    "langgraph-node": "test_docs_examples_langgraph.test_the_node_example_pauses_and_the_resumer_line_finishes_it",
    "langchain-hitl": "test_docs_examples_langgraph.test_the_middleware_example_resumes_with_one_action_approved_and_one_rejected",
    "langgraph-resume": "test_docs_examples_langgraph.test_the_node_example_pauses_and_the_resumer_line_finishes_it",
    "langgraph-async": "test_docs_examples_langgraph.test_the_async_example_streams_to_its_pause_and_the_async_resumer_finishes_it",
    "langgraph-resume-async": "test_docs_examples_langgraph.test_the_async_example_streams_to_its_pause_and_the_async_resumer_finishes_it",
    "langgraph-postgres": "test_docs_examples_langgraph.test_the_postgres_example_is_resumed_once_per_thread_by_resumers_in_two_folders",
    "langgraph-resume-postgres": "test_docs_examples_langgraph.test_the_postgres_example_is_resumed_once_per_thread_by_resumers_in_two_folders",
    "langgraph-webhook": "test_docs_examples_langgraph.test_the_webhook_lines_wake_the_resumer_with_the_sandboxs_signed_webhook",
    "openai-agents": "test_docs_examples_openai.test_the_example_sends_what_was_approved_or_edited_and_the_model_reads_a_rejection",
    "openai-resume-app": "test_openai_resume_cli.test_two_resumers_resume_a_decided_run_once_with_the_edit_and_say_so",
    "openai-resume": "test_openai_resume_cli.test_the_webhook_line_is_woken_by_the_decision_not_by_its_scan",
    # Pydantic AI's, in test_docs_examples_pydantic_ai.py (with this file's sandbox):
    "pydantic-ai-inline": "test_docs_examples_pydantic_ai.test_the_inline_example_waits_for_the_person_and_goes_on_with_their_decision",
    "pydantic-ai-pause": "test_docs_examples_pydantic_ai.test_the_pause_example_ends_the_run_and_resumes_it_once_in_another_process",
    # Run in its own module: it needs a server that signs webhooks, a worker to SIGKILL, and PostgreSQL.
    "dbos-refunds": "test_dbos.test_the_recipe_killed_while_it_waits_pays_the_edited_refund_once",
}


@dataclass
class Sandbox:
    demo: DemoProcess
    env: dict[str, str]  # a second terminal: venv activated, the export lines pasted
    person: SandboxPerson
    seen: set[str] = field(default_factory=set)

    def new_request(self, matches: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> dict[str, Any]:
        """The first pending request that `matches` and no earlier step of these tests took."""
        deadline = time.monotonic() + timeout
        while True:
            for item in self.demo.api("GET", "/api/v1/approvals?status=pending&limit=100")["items"]:
                if item["id"] not in self.seen and matches(item):
                    self.seen.add(item["id"])
                    return dict(item)
            assert time.monotonic() < deadline, "the example's request did not appear"
            time.sleep(0.05)  # test-side: the example is another process, its submit lands soon

    def request(self, request_id: str) -> dict[str, Any]:
        return dict(self.demo.api("GET", f"/api/v1/approvals/{request_id}"))


def pasted(exports: dict[str, str]) -> dict[str, str]:
    """This machine's environment as a fresh terminal has it, after `source .venv/bin/activate` and the paste."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SIGNOFF_", "ANTHROPIC_", "SLACK_")) and k not in ("PYTHONPATH", "DATABASE_URL")}
    env.update(PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "/usr/bin:/bin")]),
               VIRTUAL_ENV=str(VENV_BIN.parent), **exports)
    return env


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    signoff = VENV_BIN / "signoff"
    assert signoff.exists(), f"{signoff} is missing: `pip install -e .` installs it"
    demo = start_demo(tmp_path_factory.mktemp("demo"), program=[str(signoff)])  # `signoff demo`, as the pages say
    try:
        exports = exported(demo)
        yield Sandbox(demo, pasted(exports), SandboxPerson(demo.url, channel=exports["SIGNOFF_CHANNEL"]))
    finally:
        demo.stop()


STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_example_left_running() -> Iterator[None]:
    """An example a failed test left waiting is killed, not left behind."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()


def start(script: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """Run a pasted snippet with bash in `cwd`, as a terminal would."""
    proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    STARTED.append(proc)
    return proc


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=RUNS)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the example did not finish:\n{out}\n{err}") from None
    return proc.returncode, out, err


def run_python(sandbox: Sandbox, name: str, tmp: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    (tmp / "example.py").write_text(doc_example(name))
    return start("python example.py", tmp, env or sandbox.env)


def test_every_marked_example_is_run_here_and_every_page_starts_from_the_sandbox() -> None:
    pages = sorted((DOCS / "integrations").glob("*.md"))
    marked = {name for name, (page, _) in doc_examples().items() if page.parent == DOCS / "integrations"}
    assert marked == set(RUN_HERE), f"marked but not run here: {marked - set(RUN_HERE)}; " \
                                    f"run here but not marked: {set(RUN_HERE) - marked}"
    for name in marked:
        module, _, test = RUN_HERE[name].rpartition(".")
        where = vars(importlib.import_module(f"tests.client.{module}")) if module else globals()
        assert callable(where.get(test)), f"{RUN_HERE[name]}, listed for {name!r}, does not exist"
    assert {p.name for p in pages} >= {"index.md", "python.md", "claude-code.md", "agent-sdk.md", "mcp.md",
                                       "langgraph.md", "dbos.md", "openai-agents.md", "pydantic-ai.md"}
    for page in pages:
        text = page.read_text()
        sections = re.findall(r"^## (.+)$", text, re.M)
        if page.name == "index.md":
            assert "Try it against the sandbox" in sections
        else:
            assert sections[0] == "Try it against the sandbox", page.name
            assert "source .venv/bin/activate && signoff demo" in text, page.name
        assert "export SIGNOFF_URL" in text or "`export SIGNOFF_URL=...`" in text, page.name


def test_the_client_example_sends_on_approval_and_says_why_not_otherwise(sandbox: Sandbox, tmp_path: Path) -> None:
    summary = "Send the refund email"
    running = run_python(sandbox, "python-client", tmp_path)
    request = sandbox.new_request(lambda r: r["summary"] == summary)
    assert request["channel"] == sandbox.env["SIGNOFF_CHANNEL"] and request["preview"]["kind"] == "email"
    sandbox.person.approve(request["id"])
    code, out, err = finish(running)
    assert (code, out) == (0, "sent to customer@example.com: Your refund\n"), err

    running = run_python(sandbox, "python-client", tmp_path)
    request = sandbox.new_request(lambda r: r["summary"] == summary)
    sandbox.person.reject(request["id"], "Wrong amount")
    code, out, err = finish(running)
    assert code == 0 and out.startswith("not sent: ") and out.endswith("rejected it: Wrong amount\n"), (out, err)
    assert "sent to" not in out

    # A channel the bot cannot post in: the wait ends at once, saying why, and nothing is sent.
    running = run_python(sandbox, "python-client", tmp_path, {**sandbox.env, "SIGNOFF_CHANNEL": "CNOWHERE"})
    code, out, err = finish(running)
    assert code == 0 and out.startswith("not sent: the approval card for apr_"), (out, err)
    assert "could not be posted in Slack (channel_not_found)" in out and "sent to" not in out


def test_the_mcp_python_example_lists_the_tools_and_gets_the_decision(sandbox: Sandbox, tmp_path: Path) -> None:
    env = {**sandbox.env, "PATH": f"{VENV_BIN}{os.pathsep}{sandbox.env.get('PATH', '')}"}  # `signoff`, as installed
    running = run_python(sandbox, "mcp-python", tmp_path, env)
    request = sandbox.new_request(lambda r: r["summary"] == "Send the refund email")
    assert request["action"]["name"] == "send_email" and request["channel"] == sandbox.env["SIGNOFF_CHANNEL"]
    sandbox.person.approve(request["id"])
    code, out, err = finish(running)
    assert code == 0, (out, err)
    assert out.splitlines() == ["tools: request_approval, ask_human, permission_prompt",
                                "approved {'to': 'customer@example.com', 'subject': 'Your refund'}"], (out, err)

    running = run_python(sandbox, "mcp-python", tmp_path, env)
    request = sandbox.new_request(lambda r: r["summary"] == "Send the refund email")
    sandbox.person.reject(request["id"], "Not today")
    code, out, err = finish(running)
    assert code == 0 and out.splitlines()[1].startswith("not approved: rejected"), (out, err)

    # A channel the bot cannot post in: a tool error, said as such (no decision to read).
    code, out, err = finish(run_python(sandbox, "mcp-python", tmp_path, {**env, "SIGNOFF_CHANNEL": "CNOWHERE"}))
    assert code == 0 and out.splitlines()[1].startswith("no decision:") and "channel_not_found" in out, (out, err)


def test_the_decorated_function_runs_only_once_approved(sandbox: Sandbox, tmp_path: Path) -> None:
    summary = "Refund 40 USD to customer@example.com"
    running = run_python(sandbox, "require-approval", tmp_path)
    request = sandbox.new_request(lambda r: r["summary"] == summary)
    assert request["action"]["params_schema"]["properties"]["amount"] == {"type": "integer"}
    sandbox.person.approve(request["id"])
    code, out, err = finish(running)
    assert (code, out) == (0, "refunded 40 USD to customer@example.com\n"), err

    running = run_python(sandbox, "require-approval", tmp_path)
    sandbox.person.reject(sandbox.new_request(lambda r: r["summary"] == summary)["id"], "No refunds today")
    code, out, err = finish(running)
    assert code == 0 and out.startswith("no refund: ") and "No refunds today" in out, (out, err)
    assert "refunded" not in out


def test_the_shell_recipe_deploys_only_when_signoff_wait_says_approved(sandbox: Sandbox, tmp_path: Path) -> None:
    running = start(doc_example("signoff-wait"), tmp_path, sandbox.env)
    request = sandbox.new_request(lambda r: r["summary"] == "Deploy the api")
    sandbox.person.approve(request["id"])
    code, out, err = finish(running)
    assert code == 0 and out.splitlines() == [f"waiting for a decision on {request['id']}", "approved: deploying"], \
        (out, err)
    assert json.loads((tmp_path / "decision.json").read_text())["outcome"] == "approved"  # what it printed

    running = start(doc_example("signoff-wait"), tmp_path, sandbox.env)
    sandbox.person.reject(sandbox.new_request(lambda r: r["summary"] == "Deploy the api")["id"], "Not on a Friday")
    code, out, err = finish(running)
    assert code == 0 and out.splitlines()[-1] == "not deploying (signoff wait exited 1)", (out, err)


def hook_input(event: str, tmp: Path, tool_use_id: str, command: str) -> str:
    """What Claude Code writes on a command hook's stdin for a Bash call."""
    body: dict[str, Any] = {"session_id": "docs-" + tool_use_id, "transcript_path": str(tmp / "none.jsonl"),
                            "cwd": str(tmp), "permission_mode": "default", "hook_event_name": event,
                            "tool_name": "Bash", "tool_input": {"command": command, "description": "Clean up"},
                            "tool_use_id": tool_use_id}
    if event == "PermissionRequest":
        body.pop("tool_use_id")
        body["permission_suggestions"] = []
    return json.dumps(body)


def the_hook(settings: dict[str, Any], event: str) -> tuple[str, str]:
    [entry] = settings["hooks"][event]
    [hook] = entry["hooks"]
    assert hook["type"] == "command"
    return entry["matcher"], hook["command"]


def test_the_settings_hooks_answer_claude_code_with_the_decision(sandbox: Sandbox, tmp_path: Path) -> None:
    defer = re.search(r"^HOOK='(.*)'$", doc_example("claude-defer"), re.M)
    assert defer is not None
    cases = [("claude-settings", json.loads(doc_example("claude-settings")), "PreToolUse", "approve"),
             ("claude-permission-request", json.loads(doc_example("claude-permission-request")),
              "PermissionRequest", "approve"),
             ("claude-defer", json.loads(defer.group(1)), "PreToolUse", "reject")]
    for name, settings, event, verdict in cases:
        matcher, command = the_hook(settings, event)
        assert re.fullmatch(matcher, "Bash"), name  # Claude Code runs it for a Bash call
        assert command.startswith("signoff hook claude-code"), name  # found on PATH, as the page says
        shell_command = f"rm -rf build-{name}"
        (tmp_path / "hook.json").write_text(hook_input(event, tmp_path, f"toolu_{name.replace('-', '_')}",
                                                       shell_command))
        running = start(f"{command} < hook.json", tmp_path, sandbox.env)  # Claude Code pipes the JSON in
        request = sandbox.new_request(lambda r, c=shell_command: r["action"]["params"].get("command") == c)
        if verdict == "approve":
            sandbox.person.approve(request["id"])
        else:
            sandbox.person.reject(request["id"], "Keep the build")
        _, out, err = finish(running)
        answer = json.loads(out)["hookSpecificOutput"]
        assert answer["hookEventName"] == event, (name, out, err)
        if event == "PermissionRequest":
            assert answer["decision"]["behavior"] == "allow", (name, out)
        elif verdict == "approve":
            assert answer["permissionDecision"] == "allow", (name, out)
        else:
            assert answer["permissionDecision"] == "deny" and "Keep the build" in answer["permissionDecisionReason"]


def test_the_hook_by_hand_prints_allow_once_approved(sandbox: Sandbox, tmp_path: Path) -> None:
    running = start(doc_example("hook-by-hand"), tmp_path, sandbox.env)
    request = sandbox.new_request(lambda r: r["action"]["params"].get("command") == "rm -rf build")
    assert request["action"]["name"] == "Bash" and str(tmp_path) in request["context"]
    sandbox.person.approve(request["id"])
    code, out, err = finish(running)
    answer = json.loads(out)["hookSpecificOutput"]
    assert code == 0 and answer["permissionDecision"] == "allow", (out, err)
    assert answer["updatedInput"]["command"] == "rm -rf build"


def test_the_agent_sdk_callback_allows_what_was_approved(sandbox: Sandbox, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

    for name in ("SIGNOFF_URL", "SIGNOFF_TOKEN", "SIGNOFF_CHANNEL"):
        monkeypatch.setenv(name, sandbox.env[name])
    printed: list[Any] = []

    class TheSdk:
        """Stands in for ClaudeSDKClient: calls `can_use_tool` as the SDK does when Claude wants to write plan.md."""

        def __init__(self, options: Any) -> None:
            self.options = options

        async def __aenter__(self) -> TheSdk:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def query(self, prompt: str) -> None:
            self.prompt = prompt

        async def receive_response(self) -> Any:
            yield await self.options.can_use_tool("Write", {"file_path": str(tmp_path / "plan.md"), "content": "1.\n"},
                                                  ToolPermissionContext(tool_use_id=f"toolu_sdk_{len(printed)}"))

    namespace: dict[str, Any] = {"__name__": "example", "print": printed.append}
    exec(doc_example("claude-sdk"), namespace)
    namespace["ClaudeSDKClient"] = TheSdk
    with concurrent.futures.ThreadPoolExecutor(1) as worker:  # the example's asyncio.run, in its own thread
        for verdict in ("approve", "reject"):
            running = worker.submit(asyncio.run, namespace["main"]())
            request = sandbox.new_request(lambda r: r["action"]["name"] == "Write")
            if verdict == "approve":
                sandbox.person.approve(request["id"])
            else:
                sandbox.person.reject(request["id"], "Plan in the wiki")
            running.result(RUNS)
    # What those runs left for the garbage collector (their clients, loops) is finalized now: a finalizer
    # that imports while a later test's import is being compiled trips CPython 3.11's AST depth check.
    gc.collect()
    allowed, denied = printed
    assert isinstance(allowed, PermissionResultAllow) and allowed.updated_input == {
        "file_path": str(tmp_path / "plan.md"), "content": "1.\n"}
    assert isinstance(denied, PermissionResultDeny) and "Plan in the wiki" in denied.message


def tool_text(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    if result.structured_content:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


async def call_while_deciding(sandbox: Sandbox, session: ClientSession, tool: str, arguments: dict[str, Any],
                              matches: Callable[[dict[str, Any]], bool], verdict: str) -> dict[str, Any]:
    calling = asyncio.create_task(session.call_tool(tool, arguments))
    request = await asyncio.to_thread(sandbox.new_request, matches)
    if verdict == "approve":
        await asyncio.to_thread(sandbox.person.approve, request["id"])
    else:
        await asyncio.to_thread(sandbox.person.reject, request["id"], "Not now")
    return tool_text(await asyncio.wait_for(calling, RUNS))


async def test_the_mcp_configs_reach_the_sandbox_over_stdio_and_http(sandbox: Sandbox, tmp_path: Path) -> None:
    claude_line = shlex.split(doc_example("mcp-claude"))
    prompt_tool = claude_line[claude_line.index("--permission-prompt-tool") + 1]
    assert claude_line[claude_line.index("--mcp-config") + 1] == "mcp.json"
    _, server_name, tool = prompt_tool.split("__")

    # stdio: the server the config names, started as the host starts it, with the terminal's environment.
    stdio = json.loads(doc_example("mcp-stdio"))["mcpServers"][server_name]
    params = StdioServerParameters(command=stdio["command"], args=stdio["args"], cwd=str(tmp_path), env=sandbox.env)
    with open(tmp_path / "mcp-stderr.log", "w+") as errlog:  # what the host's log gets
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            answer = await call_while_deciding(
                sandbox, session, tool, {"tool_name": "Write", "input": {"file_path": "README.md",
                                                                         "content": "# Tidy\n"},
                                         "tool_use_id": "toolu_docs_mcp_1"},
                lambda r: r["action"]["name"] == "Write" and r["action"]["params"].get("content") == "# Tidy\n",
                "approve")
        errlog.seek(0)
        assert "HTTP Request:" not in errlog.read()  # no line per request Signoff is sent
    assert answer["behavior"] == "allow" and answer["updatedInput"]["content"] == "# Tidy\n", answer

    # streamable HTTP: the config the page's snippet writes from the export lines.
    code, out, err = finish(start(doc_example("mcp-http"), tmp_path, sandbox.env))
    assert code == 0, (out, err)
    http_config = json.loads((tmp_path / "mcp.json").read_text())["mcpServers"][server_name]
    assert http_config["type"] == "http"
    http = httpx2.AsyncClient(headers=http_config["headers"], timeout=httpx2.Timeout(30, read=120))
    async with http, streamable_http_client(http_config["url"], http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            answer = await call_while_deciding(
                sandbox, session, tool, {"tool_name": "Write", "input": {"file_path": "README.md", "content": "# X\n"},
                                         "tool_use_id": "toolu_docs_mcp_2"},
                lambda r: r["action"]["name"] == "Write" and r["action"]["params"].get("content") == "# X\n", "reject")
    assert answer["behavior"] == "deny" and "Not now" in answer["message"], answer
