"""The LangGraph page's copy-paste examples (docs/integrations/langgraph.md), run the way the page says, against
`signoff demo` (test_docs_examples.py's sandbox, and for the webhook lines a sandbox started as they say):
each app file saved in a folder and run with `python`, its card decided by a person on the sandbox page,
and the page's `signoff langgraph resume` line started from the app's folder with no PYTHONPATH.
test_docs_examples.py's first test checks every marked example is run here or there."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness import free_port
from tests.support.databases import pg_admin, pg_url_for
from tests.support.docs import doc_example
from tests.client.test_docs_examples import (
    RUNS,
    VENV_BIN,
    Sandbox,
    _no_example_left_running,
    finish,
    pasted,
    sandbox,
    start,
)
from tests.client.test_langgraph_readme import state_of
from tests.sandbox.browser import exported, start_demo
from tests.sandbox.person import SandboxPerson

__all__ = ["_no_example_left_running", "sandbox"]  # fixtures, used by name


def resume_lines() -> list[str]:
    return doc_example("langgraph-resume").splitlines()


class Printed:
    """A long-running process's stdout, line by line as it prints them (read by a thread)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.lines = proc, []  # type: list[str]
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + RUNS
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None and not self.reader.is_alive():
                assert self.proc.stderr is not None
                raise AssertionError(f"it exited {self.proc.returncode}: {self.lines} {self.proc.stderr.read()}")
            assert time.monotonic() < deadline, f"it never printed {text!r}: {self.lines}"
            time.sleep(0.05)  # test-side: the resumer is another process

    def stop(self) -> str:
        """Ctrl-C's cousin (SIGTERM); what it wrote on stderr. Its stdout is the reader's alone."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(10)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def test_the_node_example_pauses_and_the_resumer_line_finishes_it(sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(doc_example("langgraph-node"))
    code, out, err = finish(start("python myapp.py", tmp_path, sandbox.env))
    assert code == 0, err
    request = sandbox.new_request(lambda r: r["summary"] == "Send the refund email to customer@example.com")
    assert out.splitlines()[0] == f"myapp: thread refund-1234 paused; card posted for request {request['id']}", out
    sandbox.person.approve(request["id"])
    resumer = Printed(start(resume_lines()[0], tmp_path, sandbox.env))  # from the app's folder, no PYTHONPATH
    try:
        resumer.wait_for(f"resumed thread refund-1234: {request['id']} approved by ")
    finally:
        err = resumer.stop()
    assert "No module named" not in err, err
    assert "watching the checkpoints in" in resumer.lines[0] and "checkpoints.db" in resumer.lines[0], resumer.lines
    assert any(line.startswith("myapp: approved by ") and line.endswith(": sent to customer@example.com: Your refund")
               for line in resumer.lines), resumer.lines
    state = state_of(tmp_path / "myapp.py", "build_graph", "refund-1234")
    assert state.values["sent"] == "sent to customer@example.com: Your refund" and not state.next


def test_the_middleware_example_resumes_with_one_action_approved_and_one_rejected(sandbox: Sandbox,
                                                                                   tmp_path: Path) -> None:
    (tmp_path / "agentapp.py").write_text(doc_example("langchain-hitl"))
    code, out, err = finish(start("python agentapp.py", tmp_path, sandbox.env))
    assert code == 0, err
    batch = sandbox.new_request(lambda r: [i["action"]["name"] for i in r.get("items") or []] ==
                                ["send_email", "delete_file"])
    assert out.splitlines() == [f"agentapp: thread tidy-42 paused; card posted for request {batch['id']}"], out
    sandbox.person.approve_selected(batch["id"], [0])  # send the email; not the deletion
    resumer = Printed(start(resume_lines()[1], tmp_path, sandbox.env))
    try:
        # Each action's own end, not only the batch's "approved".
        resumer.wait_for(f"resumed thread tidy-42: {batch['id']} approved by alice: send_email approved, "
                         "delete_file rejected")
    finally:
        resumer.stop()
    state = state_of(tmp_path / "agentapp.py", "build_agent", "tidy-42")
    final = state.values["messages"][-1].content
    assert not state.next and "send_email: sent to customer@example.com: Tidied" in final, final
    assert "delete_file: User rejected the tool call for `delete_file`" in final and "deleted" not in final, final
    # Run again, the thread goes on from its checkpoint: it says so, instead of "card posted for request ".
    code, out, err = finish(start("python agentapp.py", tmp_path, sandbox.env))
    assert code == 0 and out.startswith("agentapp: thread tidy-42 did not pause: Done.") and "card posted" not in out, (
        out, err)


def test_the_async_example_streams_to_its_pause_and_the_async_resumer_finishes_it(sandbox: Sandbox,
                                                                                   tmp_path: Path) -> None:
    (tmp_path / "asyncapp.py").write_text(doc_example("langgraph-async"))
    code, out, err = finish(start("python asyncapp.py", tmp_path, sandbox.env))
    assert code == 0, err
    request = sandbox.new_request(lambda r: r["summary"] == "Tell customer@example.com their order shipped")
    assert out.splitlines() == [f"asyncapp: thread order-77 paused; card posted for request {request['id']}"], out
    assert request["callback_url"] is None  # no RESUMER_URL here: the resumer long-polls
    sandbox.person.approve(request["id"])
    resumer = Printed(start(doc_example("langgraph-resume-async"), tmp_path, sandbox.env))
    try:
        resumer.wait_for(f"resumed thread order-77: {request['id']} approved by ")
    finally:
        err = resumer.stop()
    assert "asyncapp: approved: sent to customer@example.com: Your order shipped" in resumer.lines, (resumer.lines, err)
    state = state_of(tmp_path / "asyncapp.py", "build_graph", "order-77")
    assert state.values["sent"] == "sent to customer@example.com: Your order shipped" and not state.next


@pytest.fixture
def checkpoints_url() -> Iterator[str]:
    """A PostgreSQL database for LangGraph's checkpoints (the one SIGNOFF_TEST_DATABASE_URL reaches)."""
    name = f"lg_docs_{uuid.uuid4().hex[:12]}"
    asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield pg_url_for(name)
    finally:
        asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.mark.postgres_only
def test_the_postgres_example_is_resumed_once_per_thread_by_resumers_in_two_folders(
        sandbox: Sandbox, tmp_path: Path, checkpoints_url: str) -> None:
    env = {**sandbox.env, "CHECKPOINTS_URL": checkpoints_url}
    hosts = [tmp_path / "host-a", tmp_path / "host-b"]  # as two machines: each folder holds pgapp.py
    for host in hosts:
        host.mkdir()
        (host / "pgapp.py").write_text(doc_example("langgraph-postgres"))
    code, out, err = finish(start("python pgapp.py", hosts[0], env))
    assert code == 0 and out.splitlines() == [f"pgapp: thread invoice-{n} paused" for n in range(3)], (out, err)
    requests = [sandbox.new_request(lambda r, n=n: r["summary"] == f"Send the invoice to customer{n}@example.com")
                for n in range(3)]
    resumers = [Printed(start(doc_example("langgraph-resume-postgres"), host, env)) for host in hosts]
    try:
        for resumer in resumers:
            resumer.wait_for("watching the checkpointer PostgresSaver")
        for request in requests:
            sandbox.person.approve(request["id"])
        deadline = time.monotonic() + RUNS
        while len(resumed(resumers)) < 3:
            assert time.monotonic() < deadline, [r.lines for r in resumers]
            time.sleep(0.05)  # test-side: two other processes resume
        time.sleep(1)  # deliberate: a window in which a second resume of any thread (must not happen) would show
    finally:
        errors = [r.stop() for r in resumers]
    assert sorted(resumed(resumers)) == [f"invoice-{n}" for n in range(3)], ([r.lines for r in resumers], errors)


def resumed(resumers: list[Printed]) -> list[str]:
    return [line.split("resumed thread ")[1].split(":")[0] for r in resumers for line in list(r.lines)
            if "resumed thread " in line]


def test_the_webhook_lines_wake_the_resumer_with_the_sandboxs_signed_webhook(tmp_path: Path) -> None:
    port = str(free_port())
    demo_line, export, resume_line, app_line = doc_example("langgraph-webhook").replace("8377", port).splitlines()
    *assignments, program, command = shlex.split(demo_line)
    assert (program, command) == ("signoff", "demo")
    (tmp_path / "demo").mkdir()
    demo = start_demo(tmp_path / "demo", program=[str(VENV_BIN / "signoff")],  # terminal 1, as the line says
                      **dict(a.split("=", 1) for a in assignments))
    try:
        exports = exported(demo)
        env = pasted(exports)
        person = SandboxPerson(demo.url, channel=exports["SIGNOFF_CHANNEL"])
        app_dir = tmp_path / "app"
        app_dir.mkdir()
        (app_dir / "asyncapp.py").write_text(doc_example("langgraph-async"))
        resumer = Printed(start(f"{export}\nexec {resume_line}", app_dir, env))
        try:
            resumer.wait_for(f"woken by webhooks at http://127.0.0.1:{port}/signoff/webhook")
            code, out, err = finish(start(f"{export}\n{app_line}", app_dir, env))
            assert code == 0, err
            request_id = out.split("card posted for request ")[1].strip()
            asked = demo.api("GET", f"/api/v1/approvals/{request_id}")
            assert asked["callback_url"] == f"http://127.0.0.1:{port}/signoff/webhook"
            person.approve(request_id)
            resumer.wait_for(f"resumed thread order-77: {request_id} approved by ")
        finally:
            err = resumer.stop()
        assert "refused a webhook" not in err, err
    finally:
        demo.stop()
