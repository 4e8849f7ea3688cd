"""LangGraph on PostgresSaver, resumed by `signoff langgraph resume` processes that share nothing but the
Signoff server and the PostgreSQL checkpointer: each runs in a working folder of its own, as on two
machines. They never resume a thread twice, and a resumer killed mid-resume is taken over by another
once its lease runs out on the server's clock (moved by the test).

Real langgraph with langgraph-checkpoint-postgres (psycopg), the running Signoff, the fake Slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.api.longpoll import LIMITS
from bot.sandbox import SlackEmulator
from tests.client.lg_graphs import calls, two_step_graph
from tests.client.test_langgraph import decided, thread
from tests.support.waits import until
from tests.client.test_langgraph_async import claim_of, pg_checkpoints
from tests.support.app import API_TOKEN, ROOT, App, ShiftedClock, start_app

pytestmark = pytest.mark.postgres_only
__all__ = ["pg_checkpoints"]  # a fixture, used by name

THREADS = 6
GRAPH = "tests.client.lg_graphs:two_step_graph"


@contextlib.contextmanager
def saver(url: str) -> Iterator[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as opened:
        opened.setup()
        yield opened


def pause(url: str, names: list[str]) -> dict[str, str]:
    """Start `two_step_graph` on each thread (each pauses at its approval); thread -> request id."""
    with saver(url) as checkpointer:
        graph = two_step_graph(checkpointer)
        return {name: graph.invoke({}, thread(name))["__interrupt__"][0].value["signoff"]["request_id"]
                for name in names}


def states(url: str, names: list[str]) -> dict[str, Any]:
    with saver(url) as checkpointer:
        graph = two_step_graph(checkpointer)
        return {name: graph.get_state(thread(name)) for name in names}


@pytest_asyncio.fixture
async def clocked(db_url: str, slack: SlackEmulator) -> AsyncIterator[tuple[App, ShiftedClock]]:
    clock = ShiftedClock()
    app = await start_app(db_url, slack, clock=clock)
    try:
        yield app, clock
    finally:
        await app.stop()


@pytest.fixture
def agent_env(clocked: tuple[App, ShiftedClock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What each resumer process has: where Signoff is; LG_CALLS, outside both folders, counts tool calls."""
    env = {"SIGNOFF_URL": clocked[0].url, "SIGNOFF_TOKEN": API_TOKEN, "LG_CALLS": str(tmp_path / "calls.jsonl")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **env, "PYTHONPATH": str(ROOT)}  # the graph's module, importable from any folder


def folder(tmp_path: Path, name: str) -> Path:
    made = tmp_path / name
    made.mkdir()
    return made


def resume(url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bot", "langgraph", "resume", "--graph", GRAPH, "--db", url, *extra]


async def test_two_resumer_processes_in_their_own_folders_never_resume_a_thread_twice(
        clocked: tuple[App, ShiftedClock], agent_env: dict[str, str], pg_checkpoints: str, tmp_path: Path) -> None:
    app, _ = clocked
    names = [f"pg-{n}" for n in range(THREADS)]
    requests = await asyncio.to_thread(pause, pg_checkpoints, names)
    hosts = [await asyncio.create_subprocess_exec(*resume(pg_checkpoints, "--scan-every", "1"), env=agent_env,
                                                  cwd=folder(tmp_path, f"host-{h}"), stdout=asyncio.subprocess.PIPE,
                                                  stderr=asyncio.subprocess.PIPE)
             for h in "ab"]
    try:
        assert app.signoff is not None
        limits = app.signoff.web_app[LIMITS]
        await until(lambda: limits.held == 2 * THREADS, timeout=60)  # both long-poll every request: each
        # decision below wakes both at once, and both go for its resume at the same moment
        for request_id in requests.values():
            await app.click(request_id, "U1", user_name="alice")
            await decided(app, request_id)

        async def all_resumed() -> bool:
            found = await asyncio.to_thread(states, pg_checkpoints, names)
            return all(state.next == () for state in found.values())

        await until(all_resumed, "every thread to be resumed by the two other processes", timeout=60, every=0.1)
    finally:
        for host in hosts:
            if host.returncode is None:
                host.send_signal(signal.SIGTERM)
        outputs = [await asyncio.wait_for(host.communicate(), 30) for host in hosts]
    assert [host.returncode for host in hosts] == [0, 0], [err.decode()[-2000:] for _, err in outputs]
    resumed = [line.split("resumed thread ")[1].split(":")[0] for out, _ in outputs
               for line in out.decode().splitlines() if "resumed thread" in line]
    assert sorted(resumed) == sorted(names), outputs  # each thread by one of them, once
    assert [c["tool"] for c in calls()] == ["send_email"] * THREADS  # no tool ran twice
    final = await asyncio.to_thread(states, pg_checkpoints, names)
    for name in names:
        claim = await claim_of(app, final[name].metadata["signoff_resume"])
        assert claim["state"] == "done" and claim["request_ids"] == [requests[name]]


async def test_a_resumer_killed_mid_resume_is_taken_over_on_another_host_after_its_lease(
        clocked: tuple[App, ShiftedClock], agent_env: dict[str, str], pg_checkpoints: str, tmp_path: Path) -> None:
    app, clock = clocked
    [request_id] = (await asyncio.to_thread(pause, pg_checkpoints, ["pg-kill"])).values()
    await app.click(request_id, "U1", user_name="alice")
    await decided(app, request_id)
    fifo = tmp_path / "block"
    os.mkfifo(fifo)
    host_a, host_b = folder(tmp_path, "host-a"), folder(tmp_path, "host-b")
    command = resume(pg_checkpoints, "--once", "--lease", "60")
    first = await asyncio.create_subprocess_exec(*command, env={**agent_env, "LG_BLOCK": str(fifo)}, cwd=host_a)
    await until(lambda: len(calls()) == 1)  # past the interrupt, inside the next node's tool
    first.kill()
    await first.wait()
    [state] = (await asyncio.to_thread(states, pg_checkpoints, ["pg-kill"])).values()
    assert state.interrupts == () and state.next == ("send",)
    held = await claim_of(app, state.metadata["signoff_resume"])
    assert held["state"] == "resuming"

    async def resumer_on_b() -> None:
        proc = await asyncio.create_subprocess_exec(*command, env=agent_env, cwd=host_b,
                                                    stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()[-2000:]

    await resumer_on_b()  # the lease of the killed resumer still runs: host b leaves the thread alone
    assert len(calls()) == 1
    assert (await claim_of(app, state.metadata["signoff_resume"]))["owner"] == held["owner"]
    clock.advance(61)
    await resumer_on_b()  # now it takes the claim over and continues from the last checkpoint
    [state] = (await asyncio.to_thread(states, pg_checkpoints, ["pg-kill"])).values()
    assert state.next == () and state.values["sent"] == "ok"
    done = await claim_of(app, state.metadata["signoff_resume"])
    assert done["state"] == "done" and done["owner"] != held["owner"]
    # The tool step the killed resumer was in ran again (LangGraph re-runs an unfinished step).
    assert [c["tool"] for c in calls()] == ["send_email", "send_email"]
