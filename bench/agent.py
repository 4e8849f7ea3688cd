"""Benchmark of the agent runner, on SQLite and PostgreSQL.

    python -m bench.agent [--db sqlite|postgres|both] [--runs 100] [--clicks 100] [--pg-url URL]

1. Persisting one step with 10, 100 and 1,000 earlier messages (must stay flat). In this process,
   on a scratch database: `--runs` runs are created per history size, each holding that many
   messages; then, for each run, the exact unit the runner commits after a model call is timed:
   fence the lease, append the assistant message (one row), record its tool call (one row),
   save the run, one audit row, one outbox row. Shown beside it, for contrast: reading the whole
   history back (what a process that has not cached the run reads before its next model call).
2. Click -> next model request. `python -m bot serve` (a subprocess) runs the demo agent against a
   scripted Anthropic fake in this process; the fake Slack Web API runs in its own process
   (bench/fake_slack.py). Each run's first model reply asks to send an email (high risk: a card);
   the bench signs an Approve click exactly as Slack would and times from sending it until the
   fake receives the run's next /v1/messages request (which carries the tool_result). Between the
   two: the click's guarded decision, the wake-up, the claim, the decision read, the tool's
   ready/started/finished writes, the .eml file, the tool_result message, the model request.
   Runs go one at a time; `--warmup` clicks are not counted.

Latencies in ms, nearest-rank percentiles. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.fake_slack import SubprocessSlack
from bench.load import Client, Dist, click_body, sign
from bench.procs import Server, scratch_database
from bot.outbox import effects
from bot.domain.model import AuditEvent
from bot.domain.runs import ExecStatus, Gate, Phase, Run, RunMessage, RunStatus, ToolExecution
from storage.run_store import SqlRunStore
from storage.sql import SqlStore
from storage.stores import open_store
from bot.sandbox.model import FakeAnthropic, Reply, message, text, tool_use
from bench.harness import API_TOKEN, SIGNING_SECRET, UNCAPPED, WEBHOOK_SECRET

DEFAULT_PG_URL = "postgresql://postgres:postgres@127.0.0.1/postgres"
SIZES = (10, 100, 1000)
OWNER = "bench"


def say(line: str) -> None:
    print(f"# {line}", flush=True)


# --------------------------------------------------------------------------- 1. persisting a step


def _message(seq: int, role: str) -> list[dict[str, Any]]:
    """A message of a realistic size (~600 bytes of JSON)."""
    if role == "assistant":
        return [{"type": "text", "text": f"Step {seq}: I will write the report section now. " * 4},
                {"type": "tool_use", "id": f"toolu_{seq:08d}", "name": "write_file",
                 "input": {"path": f"report/{seq}.md", "content": "Quarterly numbers, section text. " * 6}}]
    return [{"type": "tool_result", "tool_use_id": f"toolu_{seq - 1:08d}", "content": "wrote 198 bytes " * 8}]


@dataclass
class PersistResult:
    size: int
    persist: Dist = field(default_factory=Dist)
    read_all: Dist = field(default_factory=Dist)


async def _make_runs(runs: SqlRunStore, size: int, count: int) -> list[Run]:
    now = datetime.now(UTC)
    made = []
    for i in range(count):
        run = Run(id=f"run_bench{size:05d}x{i:012d}", status=RunStatus.RUNNING, task="bench", channel="C1",
                  agent="demo", created_at=now, updated_at=now, next_seq=size, root_ts="1.000001")
        rows = [RunMessage(run.id, seq, "user" if seq % 2 == 0 else "assistant",
                           _message(seq, "user" if seq % 2 == 0 else "assistant"), now) for seq in range(size)]
        async with runs.unit() as unit:
            await unit.insert_run(run)
            for start in range(0, len(rows), 500):
                await unit.append_messages(rows[start:start + 500])
        await runs.claim(run.id, OWNER, now, now + timedelta(hours=1))
        made.append(run)
    return made


async def _persist_step(runs: SqlRunStore, run: Run) -> float:
    """The runner's post-model-call unit (bot/agent/steps.py `_model`), timed."""
    now = datetime.now(UTC)
    seq = run.next_seq
    started = time.perf_counter()
    async with runs.unit() as unit:
        assert await unit.fence(run.id, OWNER, now + timedelta(hours=1))
        await unit.append_messages([RunMessage(run.id, seq, "assistant", _message(seq, "assistant"), now)])
        await unit.insert_executions([ToolExecution(
            run_id=run.id, tool_use_id=f"toolu_{seq:08d}", turn_seq=seq, position=0, name="write_file",
            input=_message(seq, "assistant")[1]["input"], gate=Gate.ALLOW, status=ExecStatus.READY, risk="low")])
        updated = run.evolve(next_seq=seq + 1, step_count=run.step_count + 1, phase=Phase.TOOLS, turn_seq=seq,
                             updated_at=now)
        await unit.save_run(updated)
        await unit.enqueue(effects.update_root(run.id, now))
        await unit.append_audit(AuditEvent(run.id, "step", now, None, {"tool_calls": ["write_file"]}))
    return time.perf_counter() - started


async def persist_phase(db_url: str, count: int) -> list[PersistResult]:
    store = await open_store(db_url)
    runs = SqlRunStore(store)
    results = []
    try:
        warm = await _make_runs(runs, 5, 20)
        for run in warm:
            await _persist_step(runs, run)
        for size in SIZES:
            made = await _make_runs(runs, size, count)
            result = PersistResult(size)
            for run in made:
                result.persist.add(await _persist_step(runs, run))
            for run in made[: min(count, 50)]:
                started = time.perf_counter()
                history = await runs.messages(run.id)
                result.read_all.add(time.perf_counter() - started)
                assert len(history) == size + 1
            results.append(result)
            say(f"  {size:>5} earlier messages: persist {result.persist}")
    finally:
        await store.close()
    return results


# --------------------------------------------------------------------------- 2. click -> next model request


class TimedModel:
    """The scripted model: the first request of a run asks to send an email; the next one ends the run."""

    def __init__(self) -> None:
        self.fake = FakeAnthropic()
        self.arrived: dict[str, float] = {}
        self.events: dict[str, asyncio.Event] = {}

    async def start(self) -> None:
        await self.fake.start()
        self.fake.on_request(self.reply)

    def reply(self, body: dict[str, Any]) -> Reply:
        task = body["messages"][0]["content"][0]["text"]
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            self.arrived[task] = time.perf_counter()
            self.events.setdefault(task, asyncio.Event()).set()
            return message(text("Sent."))
        return message(tool_use("send_email", {"to": "ops@example.com", "subject": task, "body": "Hello."}))

    async def next_request(self, task: str, timeout: float = 30.0) -> float:
        await asyncio.wait_for(self.events.setdefault(task, asyncio.Event()).wait(), timeout)
        return self.arrived[task]


async def _card(client: Client, server: Server, slack: SubprocessSlack, run_id: str) -> tuple[str, Any]:
    for _ in range(600):
        _, run = await client.api("GET", f"{server.url}/api/v1/runs/{run_id}")
        calls = [c for c in run["tool_calls"] if c["request_id"]]
        if calls:
            return calls[0]["request_id"], await slack.wait_post(calls[0]["request_id"])
        await asyncio.sleep(0.005)
    raise RuntimeError(f"run {run_id} never asked for approval: {run}")


async def click_phase(db_url: str, workdir: Path, engine: str, clicks: int, warmup: int) -> Dist:
    slack = SubprocessSlack(workdir / f"fake-slack-agent-{engine}.log")
    model = TimedModel()
    await slack.start()
    await model.start()
    env = {
        "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.url,
        "DATABASE_URL": db_url, "SIGNOFF_API_TOKENS": API_TOKEN, "SIGNOFF_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "ANTHROPIC_BASE_URL": model.fake.url, "ANTHROPIC_API_KEY": "bench", "SIGNOFF_MODEL": "claude-bench",
        "SIGNOFF_WORKSPACE": str(workdir / f"workspace-{engine}"), "SIGNOFF_EMAIL_OUTBOX": str(workdir / f"outbox-{engine}"),
        "SIGNOFF_LOG_LEVEL": "WARNING", **UNCAPPED,
    }
    server = Server(f"signoff-agent-{engine}", ["bot", "serve"], env, workdir)
    client = Client()
    latency = Dist()
    try:
        await server.start()
        for i in range(warmup + clicks):
            task = f"bench {engine} run {i}"
            _, run = await client.api("POST", f"{server.url}/api/v1/runs", json={"task": task, "channel": "C1"})
            request_id, post = await _card(client, server, slack, run["id"])
            signed = sign(await click_body(request_id, post))
            sent = time.perf_counter()
            status, _ = await client.send(server.url + "/slack/events", signed)
            assert status == 200
            arrived = await model.next_request(task)
            if i >= warmup:
                latency.add(arrived - sent)
        assert model.fake.rejections == [], model.fake.rejections[:3]
    finally:
        await client.close()
        server.stop()
        await model.fake.stop()
        await slack.stop()
    return latency


# --------------------------------------------------------------------------- main


async def run_engine(engine: str, args: argparse.Namespace, workdir: Path) -> tuple[list[PersistResult], Dist]:
    say(f"{engine}: 1. persisting one step ({args.runs} runs per history size)")
    async with scratch_database(engine, pg_url=args.pg_url, workdir=workdir / "persist") as db_url:
        persisted = await persist_phase(db_url, args.runs)
    say(f"{engine}: 2. click -> next model request ({args.clicks} runs after {args.warmup} warm-up)")
    async with scratch_database(engine, pg_url=args.pg_url, workdir=workdir / "click") as db_url:
        clicks = await click_phase(db_url, workdir, engine, args.clicks, args.warmup)
    say(f"  {clicks}")
    return persisted, clicks


def report(results: dict[str, tuple[list[PersistResult], Dist]], command: str) -> None:
    print()
    print(f"Agent runner ({command})")
    print()
    print("| engine | earlier messages | persist one step p50 | p99 | (read whole history p50) |")
    print("|---|---:|---:|---:|---:|")
    for engine, (persisted, _) in results.items():
        for r in persisted:
            print(f"| {engine} | {r.size:,} | {r.persist.p50:.2f} ms | {r.persist.p99:.2f} ms "
                  f"| ({r.read_all.p50:.2f} ms) |")
    print()
    print("| engine | click -> next model request | p50 | p99 | max |")
    print("|---|---:|---:|---:|---:|")
    for engine, (_, clicks) in results.items():
        print(f"| {engine} | n={clicks.n} | {clicks.p50:.1f} ms | {clicks.p99:.1f} ms | {clicks.max:.1f} ms |")
    print()


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=100, help="runs per history size (figure 1)")
    parser.add_argument("--clicks", type=int, default=100, help="timed clicks (figure 2)")
    parser.add_argument("--warmup", type=int, default=10, help="clicks not counted (figure 2)")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    return parser.parse_args(argv)


async def main_async(args: argparse.Namespace, command: str) -> None:
    engines = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results = {}
    with tempfile.TemporaryDirectory(prefix="signoff-bench-agent-") as tmp:
        workdir = Path(tmp)
        for engine in engines:
            (workdir / "persist").mkdir(exist_ok=True)
            (workdir / "click").mkdir(exist_ok=True)
            results[engine] = await run_engine(engine, args, workdir)
    report(results, command)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    command = "python -m bench.agent " + " ".join(argv if argv is not None else sys.argv[1:])
    asyncio.run(main_async(args, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
