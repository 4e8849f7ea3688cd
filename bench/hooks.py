"""What a Claude Code tool call that policy allows costs through Signoff's hooks.

    python -m bench.hooks [--n 400] [--runs 40] [--compare CHECKOUT] [--profile DIR]

HTTP hook: `POST /api/v1/hooks/claude-code` on a running `signoff serve` (SQLite, a policy that
allows `Bash(echo ...)`), one call after another, each a new tool_use_id; server CPU per call and
p50 wall, next to a bare aiohttp handler that checks the token and does one INSERT into SQLite
(bench/bare_insert.py), measured the same way in the same run. Target: within 2x the bare handler.
Beside both, the same bare handler writing instead the rows Signoff stores for an allowed call (its
request, decision and audit rows, in Signoff's schema, copied from Signoff's file after the warm-up):
what that storage costs with no Signoff code around it.

Command hook: `signoff hook claude-code` (the console script, as Claude Code runs it) fed one allowed
call on stdin, p50 wall per process, next to `python -c pass` in the same run. Target: within 3x.
Both run against the same server. `--compare CHECKOUT` also runs another checkout's server (its own
SQLite file) and measures its HTTP hook in each round, beside this one's: a change's before and after
on one machine at one time (CPU, not wall: the machine is shared). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench.fake_slack import InProcessSlack
from bench.harness import API_TOKEN
from bench.procs import Server, scratch_database, signoff_server
from bench.spy import Spy

POLICY = """
rules:
  - name: echo-is-fine
    tool: Bash
    params: {command: {regex: "^echo "}}
    effect: allow
    tier: low
"""
HOOK = "/api/v1/hooks/claude-code?wait=50&channel=C1"


def call(session: str, n: int, cwd: str) -> dict[str, Any]:
    """What Claude Code POSTs for an allowed Bash call."""
    return {"session_id": session, "transcript_path": f"{cwd}/{session}.jsonl", "cwd": cwd,
            "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": f"echo {n}", "description": "Say a number"}, "tool_use_id": f"toolu_{n:06d}"}


async def http_round(url: str, path: str, n: int, server: Server, cwd: str) -> tuple[float, float]:
    """(server CPU ms per call, p50 wall ms) for `n` calls one after another."""
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    session = uuid.uuid4().hex
    async with aiohttp.ClientSession() as client:
        for warm in range(20):
            async with client.post(url + path, json=call(session + "w", warm, cwd), headers=headers) as r:
                await r.read()
        walls = []
        cpu = server.cpu_seconds()
        for i in range(n):
            started = time.perf_counter()
            async with client.post(url + path, json=call(session, i, cwd), headers=headers) as response:
                answer = await response.json()
            walls.append(time.perf_counter() - started)
            assert answer["hookSpecificOutput"]["permissionDecision"] == "allow", answer
        return (server.cpu_seconds() - cpu) / n * 1000, statistics.median(walls) * 1000


async def settled(server: Server, quiet: float = 0.02, longest: float = 60.0) -> None:
    """Once `server` has finished its start-up work (e.g. the MCP SDK it imports in the background): it used
    less than `quiet` of a CPU over half a second. That work is not the calls' cost."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + longest
    while loop.time() < deadline:
        before = server.cpu_seconds()
        await asyncio.sleep(0.5)
        if server.cpu_seconds() - before < quiet * 0.5:
            return


def process_wall(argv: list[str], stdin: bytes, runs: int, env: dict[str, str], check: bool = False) -> float:
    """p50 wall ms of `argv` run `runs` times with `stdin`."""
    walls = []
    for i in range(runs):
        data = stdin.replace(b"@N@", str(i).encode())
        started = time.perf_counter()
        done = subprocess.run(argv, input=data, capture_output=True, env=env)
        walls.append(time.perf_counter() - started)
        if check:
            answer = json.loads(done.stdout)["hookSpecificOutput"]
            assert answer["permissionDecision"] == "allow", (answer, done.stderr[-2000:])
    return statistics.median(walls) * 1000


async def run(args: argparse.Namespace) -> None:
    import os

    with tempfile.TemporaryDirectory(prefix="signoff-hooks-") as tmp:
        work = Path(tmp)
        (work / "policy.yaml").write_text(POLICY)
        slack = InProcessSlack()
        await slack.start()
        async with scratch_database("sqlite", pg_url="", workdir=work) as db_url:
            server = signoff_server("hooks", db_url, slack.url, work)
            server.env["SIGNOFF_POLICY"] = str(work / "policy.yaml")
            server.env["SIGNOFF_LOG_LEVEL"] = "WARNING"
            bare = Server("bare-insert", ["bench.bare_insert"],
                          {"BARE_DB": str(work / "bare.db"), "BARE_TOKEN": API_TOKEN}, work)
            await server.start()
            await bare.start()
            await settled(server)
            rows = await _rows_of_an_allowed_call(server, db_url, work)
            same_rows = Server("bare-same-rows", ["bench.bare_insert"],
                               {"BARE_DB": str(work / "bare-rows.db"), "BARE_TOKEN": API_TOKEN, "BARE_ROWS": str(rows)},
                               work)
            await same_rows.start()
            other = await _other_checkout(args.compare, slack.url, work) if args.compare else None
            for started in (server, bare, same_rows, other):
                if started is not None:
                    await settled(started)
            try:
                print(f"HTTP hook, an allowed call, {args.n} calls one after another (SQLite), {args.rounds} rounds:")
                cpus: dict[str, list[float]] = {"signoff": [], "bare": [], "rows": [], "other": []}
                for round_number in range(args.rounds):
                    spy: Any = contextlib.nullcontext()
                    if args.profile is not None and server.proc is not None:
                        args.profile.mkdir(parents=True, exist_ok=True)
                        spy = Spy(server.proc.pid, args.profile / f"http-hook-{round_number + 1}.folded")
                    with spy:
                        hook_cpu, hook_wall = await http_round(server.url, HOOK, args.n, server, tmp)
                    bare_cpu, bare_wall = await http_round(bare.url, "/hook", args.n, bare, tmp)
                    rows_cpu, rows_wall = await http_round(same_rows.url, "/hook", args.n, same_rows, tmp)
                    print(f"  round {round_number + 1}: signoff {hook_cpu:.2f} ms CPU, p50 {hook_wall:.2f} ms | "
                          f"bare INSERT handler {bare_cpu:.2f} ms CPU, p50 {bare_wall:.2f} ms | "
                          f"ratio CPU {hook_cpu / bare_cpu:.2f}x, wall {hook_wall / bare_wall:.2f}x\n"
                          f"           bare handler writing Signoff's rows {rows_cpu:.2f} ms CPU, p50 {rows_wall:.2f} ms"
                          f" | signoff / it: CPU {hook_cpu / rows_cpu:.2f}x, wall {hook_wall / rows_wall:.2f}x")
                    cpus["signoff"].append(hook_cpu)
                    cpus["bare"].append(bare_cpu)
                    cpus["rows"].append(rows_cpu)
                    if other is not None:
                        other_cpu, other_wall = await http_round(other.url, HOOK, args.n, other, tmp)
                        cpus["other"].append(other_cpu)
                        print(f"           {args.compare}: {other_cpu:.2f} ms CPU, p50 {other_wall:.2f} ms | "
                              f"ratio CPU {other_cpu / bare_cpu:.2f}x; this checkout / it {hook_cpu / other_cpu:.2f}x")
                median = {name: statistics.median(got) for name, got in cpus.items() if got}
                print(f"  median CPU: signoff {median['signoff']:.2f} ms, bare {median['bare']:.2f} ms "
                      f"({median['signoff'] / median['bare']:.2f}x), bare writing Signoff's rows {median['rows']:.2f} ms "
                      f"({median['signoff'] / median['rows']:.2f}x)"
                      + (f", {args.compare} {median['other']:.2f} ms ({median['other'] / median['bare']:.2f}x)"
                         if "other" in median else ""))

                env = {**os.environ, "SIGNOFF_URL": server.url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1"}
                script = Path(sys.executable).parent / "signoff"
                hook_argv = [str(script), "hook", "claude-code", "--wait", "50"]
                stdin = json.dumps(call(uuid.uuid4().hex, 0, tmp)).replace('"toolu_000000"', '"toolu_@N@"').encode()
                print(f"command hook, an allowed call, {args.runs} runs each, 3 rounds:")
                for round_number in range(3):
                    bare_python = process_wall([sys.executable, "-c", "pass"], b"", args.runs, env)
                    hook_wall = process_wall(hook_argv, stdin.replace(b"toolu_@N@", f"toolu_{round_number}_@N@".encode()),
                                             args.runs, env, check=True)
                    print(f"  round {round_number + 1}: `signoff hook claude-code` p50 {hook_wall:.1f} ms | "
                          f"`python -c pass` p50 {bare_python:.1f} ms | ratio {hook_wall / bare_python:.2f}x")
            finally:
                server.stop()
                bare.stop()
                same_rows.stop()
                if other is not None:
                    other.stop()
                await slack.stop()


async def _rows_of_an_allowed_call(server: Server, db_url: str, work: Path) -> Path:
    """A few allowed calls to `server`, then its file's schema and the rows it stored for the last of them,
    written for bench.bare_insert's BARE_ROWS."""
    import sqlite3

    from bench.bare_insert import rows_of

    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    async with aiohttp.ClientSession() as client:
        for n in range(5):
            async with client.post(server.url + HOOK, json=call(uuid.uuid4().hex, n, str(work)), headers=headers) as r:
                await r.read()
    db = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    try:
        (last,) = db.execute("SELECT id FROM requests ORDER BY created_at DESC LIMIT 1").fetchone()
        shape = rows_of(db, last)
    finally:
        db.close()
    path = work / "rows.json"
    path.write_text(json.dumps(shape, default=str))
    return path


async def _other_checkout(root: Path, slack_url: str, work: Path) -> Server:
    """`signoff serve` from another checkout (its server and agent-side code), on its own SQLite file (which
    its server migrates as it starts)."""
    other = signoff_server("hooks-other", f"sqlite:///{work / 'other.db'}", slack_url, work)
    other.env.update(SIGNOFF_POLICY=str(work / "policy.yaml"), SIGNOFF_LOG_LEVEL="WARNING",
                     PYTHONPATH=f"{root.resolve()}:{root.resolve() / 'client'}")
    await other.start()
    return other


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="HTTP calls per round")
    parser.add_argument("--runs", type=int, default=40, help="command hook processes per round")
    parser.add_argument("--rounds", type=int, default=3, help="HTTP rounds (each: this server, bare, --compare's)")
    parser.add_argument("--compare", type=Path, default=None,
                        help="another checkout (e.g. main's) whose HTTP hook is measured in the same rounds")
    parser.add_argument("--profile", type=Path, default=None,
                        help="py-spy (pip install py-spy) samples the server during each HTTP round into DIR")
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
