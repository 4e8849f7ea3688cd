"""Where an allowed Claude Code HTTP hook call's CPU goes, stage by stage.

    python -m bench.hook_stages [--n 3000] [--warm 500]

Signoff in this process (bench.harness.start_app on a fresh SQLite file, bench.hooks' policy), the
client beside it, calls one after another. Each stage's function is wrapped to add up the thread's
CPU clock while it runs (nested stages are inside their parents; the wrappers cost a little each),
and each SQLite statement run on the loop (storage/sqlite/driver.py) is added up by its kind.
Prints ms per call; asserts nothing. The figures in docs/benchmarks.md "Claude Code hooks".
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

SPENT: collections.Counter[str] = collections.Counter()
ON = [False]


def _timed(owner: Any, attr: str, label: str) -> None:
    """Wrap `owner.attr` (a coroutine function or a plain one) to add its thread CPU time to SPENT[label]."""
    original = getattr(owner, attr)
    if asyncio.iscoroutinefunction(original):
        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            if not ON[0]:
                return await original(*args, **kwargs)
            started = time.thread_time()
            try:
                return await original(*args, **kwargs)
            finally:
                SPENT[label] += time.thread_time() - started
        setattr(owner, attr, timed_async)
        return

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if not ON[0]:
            return original(*args, **kwargs)
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[label] += time.thread_time() - started
    setattr(owner, attr, timed)


STAGES: list[str] = []  # the labels in the order printed


def _wrap_stages() -> None:
    import bot.api.claude_hooks as hooks
    import bot.api.routes as routes
    import bot.approvals.gate as gate
    import signoff.claude_tools as claude_tools
    import storage.sqlite.driver as driver
    import storage.sqlite.store as sqlite_store

    for owner, attr, label in (
        (hooks, "claude_code_hook", "the hook handler, all of it (not aiohttp's own work)"),
        (hooks, "submit_approval", "  the submit (checks, policy, write)"),
        (hooks, "validate", "    the body model (pydantic)"),
        (routes, "check_body", "    the parameters against the tool's schema"),
        (routes, "body_hash", "    the idempotency hash"),
        (claude_tools, "preview", "    the preview"),
        (gate.PolicyGate, "check", "    the policy check"),
        (gate, "evaluate", "      the rules"),
        (gate.PolicyGate, "write", "    the write, with the hop into its group"),
        (gate.PolicyGate, "_write_group", "      the group-committed unit"),
        (gate.PolicyGate, "stage", "        staging the call (stamp check, rows, metrics)"),
        (sqlite_store.SqliteUnit, "insert_decided", "          the rows' values and INSERTs"),
        (hooks, "_answer_for", "  the answer"),
        (hooks, "_answer", "  the answer's JSON"),
    ):
        _timed(owner, attr, label)
        STAGES.append(label)

    original = driver.InlineConnection._execute

    async def statement(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not ON[0]:
            return await original(self, fn, *args, **kwargs)
        started = time.thread_time()
        try:
            return await original(self, fn, *args, **kwargs)
        finally:
            name = getattr(fn, "__name__", "?")
            if name == "execute" and args:
                name = " ".join(str(args[0]).split()[:3])
            SPENT[f"SQLite: {name}"] += time.thread_time() - started

    driver.InlineConnection._execute = statement  # type: ignore[method-assign]


async def run(n: int, warm: int) -> None:
    _wrap_stages()
    from bench.harness import API_TOKEN, start_app
    from bench.hooks import HOOK, POLICY, call
    from bot.sandbox import SlackEmulator
    from storage.migrate import upgrade

    with tempfile.TemporaryDirectory(prefix="signoff-hook-stages-") as tmp:
        (Path(tmp) / "policy.yaml").write_text(POLICY)
        slack = SlackEmulator()
        await slack.start()
        url = f"sqlite:///{tmp}/stages.db"
        await upgrade(url)
        app = await start_app(url, slack, SIGNOFF_POLICY=f"{tmp}/policy.yaml", SIGNOFF_LOG_LEVEL="WARNING")
        headers = {"Authorization": f"Bearer {API_TOKEN}"}
        session = uuid.uuid4().hex
        try:
            for i in range(warm + n):
                ON[0] = i >= warm
                if i == warm:
                    started = time.thread_time()
                async with app.session.post(app.url + HOOK, json=call(session, i, tmp), headers=headers) as resp:
                    answer = await resp.json()
                assert answer["hookSpecificOutput"]["permissionDecision"] == "allow", answer
            whole = (time.thread_time() - started) / n * 1000
        finally:
            ON[0] = False
            await app.session.close()
            await app.slack_client.close()
            await app.runner.cleanup()
            await slack.stop()
    print(f"an allowed HTTP hook call, {n} one after another after {warm} (SQLite), ms of thread CPU per call:")
    print(f"  {whole:.4f}  the whole process: server, client and the loop")
    for label in STAGES:
        print(f"  {SPENT[label] / n * 1000:.4f}  {label}")
    for label, spent in sorted(((k, v) for k, v in SPENT.items() if k.startswith("SQLite")), key=lambda kv: -kv[1]):
        if spent / n * 1000 >= 0.001:
            print(f"  {spent / n * 1000:.4f}  {label}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="calls timed")
    parser.add_argument("--warm", type=int, default=500, help="calls before the timing starts")
    args = parser.parse_args(argv)
    asyncio.run(run(args.n, args.warm))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
