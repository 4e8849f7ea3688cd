"""Benchmark of policy evaluation: 1,000 rules and 10,000 remembered grants.

    python -m bench.policy [--rules 1000] [--grants 10000] [--tools 100] [--calls 20000] [--seed 7]

A policy file of `--rules` rules is generated (tool globs and exact names; parameter conditions
with globs, regexes, numeric comparisons and any-of lists; requester and channel patterns; deny,
ask, allow and tier-only rules, deny rules spread through the file so that a call must look at
all its candidate rules) and parsed exactly as `SIGNOFF_POLICY` is at start-up. `--grants` grants
are spread over `--tools` tool names. Each of `--calls` calls (random tool, random parameters,
some matching grants) is evaluated once, timed on its own with perf_counter_ns:

    evaluate          `evaluate(policy, call, index, now)` with the grant index already built
    index+evaluate    building the GrantIndex from that tool's grants, then evaluating: what a
                      submit does after reading the tool's live grants (the read itself is a
                      database round trip, not counted here)
    one hot tool      all `--grants` grants on the called tool (the worst case for the index)

The first call of each tool name fills the rule cache (rules by tool); those are included.
Printed: p50 / p99 / max per evaluation in microseconds, wall clock and this thread's CPU time
(on a busy machine the wall-clock tail is the OS running something else). No figure is asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.domain.grants import FieldMatch, Grant, GrantIndex, Scope
from bot.domain.model import Risk
from bot.domain.policy import Call, Policy, evaluate
from bot.policy.file import parse_policy

NOW = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)
FIELDS = ("to", "amount", "env", "path", "subject")


def tool_name(i: int) -> str:
    return f"{('send', 'read', 'write', 'delete', 'deploy')[i % 5]}_thing{i}"


def policy_text(rules: int, tools: int, rng: random.Random) -> str:
    lines = ["default_tier: high", "tiers:", "  critical: {approvers: [U1, U2], quorum: 2}", "rules:"]
    for n in range(rules):
        kind = n % 10
        tool = tool_name(rng.randrange(tools)) if kind < 7 else f"{('send', 'read', 'write')[n % 3]}_*"
        lines.append(f"  - name: rule-{n}")
        lines.append(f"    tool: \"{tool}\"")
        lines.append("    params:")
        if kind in (0, 5):
            lines.append(f"      to: {{glob: \"*@domain{rng.randrange(50)}.com\"}}")
        elif kind in (1, 6):
            lines.append(f"      amount: {{gt: {rng.randrange(1, 10_000)}}}")
        elif kind in (2, 7):
            lines.append(f"      path: {{regex: \"^/srv/app{rng.randrange(30)}/.*\\\\.(py|sql)$\"}}")
        elif kind in (3, 8):
            lines.append(f"      env: {{any_of: [prod{rng.randrange(9)}, staging{rng.randrange(9)}]}}")
        else:
            lines.append(f"      subject: {{glob: \"*urgent{rng.randrange(20)}*\"}}")
        if n % 4 == 0:
            lines.append(f"    requester: \"agent-{rng.randrange(10)}*\"")
        if n % 6 == 0:
            lines.append(f"    channel: [C{rng.randrange(20)}, C{rng.randrange(20)}]")
        effect = ("deny", "ask", "allow", None)[n % 4]
        if effect:
            lines.append(f"    effect: {effect}")
        if effect == "ask" and n % 3 == 0:
            lines.append(f"    tier: {('low', 'medium', 'high', 'critical')[n % 4]}")
        if effect is None:
            lines.append(f"    tier: {('low', 'medium', 'high')[n % 3]}")
    return "\n".join(lines) + "\n"


def params(rng: random.Random) -> dict[str, Any]:
    return {"to": f"user{rng.randrange(100)}@domain{rng.randrange(60)}.com", "amount": rng.randrange(0, 12_000),
            "env": rng.choice(["prod1", "staging2", "dev"]), "path": f"/srv/app{rng.randrange(40)}/x.py",
            "subject": rng.choice(["hello", "urgent3 fix", "weekly"])}


def grants(count: int, tools: int, rng: random.Random, *, only_tool: str | None = None) -> list[Grant]:
    out = []
    for n in range(count):
        p = params(rng)
        match = {k: FieldMatch("eq", v) for k, v in p.items()}
        match["to"] = FieldMatch("glob", "*@" + p["to"].split("@")[1])
        scope = (Scope.EVERYONE, Scope.CHANNEL, Scope.AGENT)[n % 3]
        value = None if scope is Scope.EVERYONE else (f"C{n % 20}" if scope is Scope.CHANNEL else f"agent-{n % 10}")
        out.append(Grant(f"grt_{n}", only_tool or tool_name(rng.randrange(tools)), match, scope, value, "U1",
                         NOW - timedelta(days=1), expires_at=NOW + timedelta(days=n % 7 - 1) if n % 5 else None))
    return out


def calls(count: int, tools: int, rng: random.Random, pool: list[Grant], *, tool: str | None = None) -> list[Call]:
    out = []
    for n in range(count):
        if n % 4 == 0 and pool:  # a quarter replay a grant's exact parameters (they may still be out of scope)
            g = rng.choice(pool)
            p = {k: (m.value if m.op == "eq" else "x" + m.value.lstrip("*")) for k, m in g.match.items()}
            name = g.tool
        else:
            p, name = params(rng), tool or tool_name(rng.randrange(tools))
        out.append(Call(name, p, risk=rng.choice(list(Risk)), requester=f"agent-{rng.randrange(12)}",
                        channel=f"C{rng.randrange(25)}"))
    return out


def timed(policy: Policy, work: list[Call], by_tool: dict[str, list[Grant]], *,
          build: bool) -> tuple[list[float], list[float]]:
    """(wall, cpu) microseconds per call. CPU time (this thread's) leaves out time the OS ran
    other processes: on a shared machine the wall-clock tail is mostly that."""
    prebuilt = {t: GrantIndex(g) for t, g in by_tool.items()}
    wall, cpu = [], []
    for call in work:
        start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        index = GrantIndex(by_tool.get(call.tool, ())) if build else prebuilt.get(call.tool)
        evaluate(policy, call, index, NOW)
        cpu.append((time.thread_time_ns() - start_cpu) / 1000)
        wall.append((time.perf_counter_ns() - start) / 1000)
    return wall, cpu


def report(label: str, times: tuple[list[float], list[float]]) -> None:
    for kind, values in zip(("wall", "cpu"), times, strict=True):
        ordered = sorted(values)
        p50, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
        print(f"  {label:<16} {kind:<4} p50 {p50:7.1f} µs   p99 {p99:7.1f} µs   max {ordered[-1]:8.1f} µs"
              f"   ({len(values)} calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--grants", type=int, default=10_000)
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    text = policy_text(args.rules, args.tools, rng)
    start = time.perf_counter()
    policy = parse_policy(text, "bench.yaml")
    loaded = time.perf_counter() - start
    pool = grants(args.grants, args.tools, rng)
    by_tool: dict[str, list[Grant]] = {}
    for g in pool:
        by_tool.setdefault(g.tool, []).append(g)
    work = calls(args.calls, args.tools, rng, pool)
    print(f"policy evaluation: {len(policy.rules)} rules ({len(text) // 1024} KB of YAML, parsed in "
          f"{loaded * 1000:.0f} ms), {len(pool)} grants over {len(by_tool)} tools; Python "
          f"{platform.python_version()} on {platform.machine()}, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    report("evaluate", timed(policy, work, by_tool, build=False))
    report("index+evaluate", timed(policy, work, by_tool, build=True))
    hot = tool_name(0)
    hot_pool = grants(args.grants, args.tools, rng, only_tool=hot)
    report("one hot tool", timed(policy, calls(args.calls, args.tools, rng, hot_pool, tool=hot),
                                 {hot: hot_pool}, build=False))


if __name__ == "__main__":
    main()
