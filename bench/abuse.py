"""What one abusive agent can do to everyone else (issue 33): prints figures, asserts nothing.

    python -m bench.abuse [--flood 150] [--pace 1.0] [--seconds 3] [--half-open 200] [--header-timeout 2]

Signoff runs as `signoff serve` in a subprocess (SQLite in a temporary folder, loopback only), Slack is
the bench's emulator in this process, so this process's clock measures the server from outside.
(a) token `flood` submits `--flood` approvals into C1 within a second; then token `calm` submits one
    critical card into C1: its submit->card delay is printed next to the channel's pace.
(b) for `--seconds`, token `flood` keeps the most costly params checks it is allowed in flight (the
    16,000-value uniqueItems body, and a 250 KB body whose schema multiplies to 2^30 evaluations) while
    /healthz and a signed Slack click are timed every 20 ms: p50 and max of each.
(c) `--half-open` connections each send half a request's headers and stall: how long until the server
    closed them, while /healthz is still answered.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.fake_slack import InProcessSlack
from bench.harness import SIGNING_SECRET, WEBHOOK_SECRET, approval_body
from bench.procs import Server
from bot.sandbox.signed import SlackClient

FLOOD, CALM = "flood-bench-secret", "calm-bench-secret"


def _ms(values: list[float]) -> str:
    if not values:
        return "none"
    return f"p50 {statistics.median(values) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms (n={len(values)})"


async def _post(session: aiohttp.ClientSession, url: str, secret: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with session.post(url + "/api/v1/approvals", json=body, headers={"Authorization": f"Bearer {secret}"}) as r:
        return r.status, await r.json()


def _costly_bodies() -> list[dict[str, Any]]:
    mixed: list[Any] = [[i] if i % 2 else {"n": i} for i in range(16_000)]
    unique = {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}
    defs: dict[str, Any] = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(30)}
    defs["d30"] = {"type": "string"}
    multiplying = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
    filler = "y" * 250_000  # the largest accepted params are 256 KB
    return [approval_body(action={"name": "t", "params": {"x": mixed}, "params_schema": unique}),
            approval_body(action={"name": "t", "params": {"x": 1, "pad": filler}, "params_schema": multiplying})]


async def flood_then_critical(session: aiohttp.ClientSession, url: str, slack: InProcessSlack, flood: int,
                              pace: float) -> dict[str, Any]:
    start = time.monotonic()

    async def one(n: int) -> int:
        await asyncio.sleep(n / flood)  # `flood` submits spread over one second
        return (await _post(session, url, FLOOD, approval_body(summary=f"Flood {n}", risk="low")))[0]

    statuses = await asyncio.gather(*(one(n) for n in range(flood)))
    accepted = statuses.count(201)
    print(f"(a) token flood: {flood} submits in {time.monotonic() - start:.2f} s: "
          f"{statuses.count(201)} accepted, {statuses.count(429)} answered 429")
    await asyncio.sleep(pace)  # its backlog is queued in C1
    submitted = time.monotonic()
    status, body = await _post(session, url, CALM, approval_body(summary="Urgent", risk="critical"))
    assert status == 201, body
    post = await slack.fake.wait_post(body["id"], timeout=600)
    before = sum(1 for p in slack.fake.posts.values() if p.at < post.at)
    print(f"(a) token calm's critical card: submit->card {post.at - submitted:.2f} s with C1's pace at {pace:g} s "
          f"a card; {accepted - before} of the {accepted} flood cards were still waiting")
    return body


async def costly_while_timed(session: aiohttp.ClientSession, url: str, card: dict[str, Any], seconds: float,
                             which: str) -> None:
    bodies = _costly_bodies()
    bodies = {"unique": bodies[:1], "multiplying": bodies[1:], "both": bodies}[which]
    outcomes: list[str] = []
    stop = time.monotonic() + seconds

    async def attacker() -> None:
        n = 0
        while time.monotonic() < stop:
            status, body = await _post(session, url, FLOOD, bodies[n % len(bodies)])
            outcomes.append(f"{status} {body.get('error', {}).get('code', '') if isinstance(body, dict) else ''}".strip())
            n += 1

    health: list[float] = []
    acks: list[float] = []
    slack_client = SlackClient(url, SIGNING_SECRET)

    async def prober() -> None:
        while time.monotonic() < stop:
            t = time.monotonic()
            async with session.get(url + "/healthz") as r:
                await r.read()
            health.append(time.monotonic() - t)
            t = time.monotonic()
            await slack_client.block_action(user="U1", action_id="signoff_reject", value=card["id"], block_id="decide",
                                            channel="C1", message_ts=card["card"]["ts"] if card.get("card") else "1.1")
            acks.append(time.monotonic() - t)
            await asyncio.sleep(0.02)

    await asyncio.gather(attacker(), prober())
    await slack_client.close()
    counted = {o: outcomes.count(o) for o in sorted(set(outcomes))}
    print(f"(b) costly params checks answered over {seconds:g} s: {counted}")
    print(f"(b) /healthz meanwhile: {_ms(health)}")
    print(f"(b) signed Slack click ack meanwhile: {_ms(acks)}")


async def half_open(session: aiohttp.ClientSession, url: str, port: int, count: int, timeout: float) -> None:
    async def stall() -> float:
        start = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /api/v1/approvals HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        await writer.drain()
        await asyncio.wait_for(reader.read(), timeout * 10 + 30)
        writer.close()
        return time.monotonic() - start

    tasks = [asyncio.create_task(stall()) for _ in range(count)]
    await asyncio.sleep(0.2)
    health: list[float] = []
    while not all(t.done() for t in tasks):
        t = time.monotonic()
        async with session.get(url + "/healthz") as r:
            await r.read()
        health.append(time.monotonic() - t)
        await asyncio.sleep(0.05)
    closed = [t.result() for t in tasks]
    print(f"(c) {count} half-sent requests closed after: p50 {statistics.median(closed):.2f} s, max {max(closed):.2f} s "
          f"(SIGNOFF_HEADER_TIMEOUT_SECONDS={timeout:g}); /healthz meanwhile: {_ms(health)}")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="signoff-abuse-") as tmp:
        slack = InProcessSlack()
        await slack.start()
        env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.url,
               "DATABASE_URL": f"sqlite:///{tmp}/abuse.db", "SIGNOFF_WEBHOOK_SECRET": WEBHOOK_SECRET,
               "SIGNOFF_API_TOKENS": f"flood:{FLOOD},calm:{CALM}",
               "SIGNOFF_SLACK_CHANNEL_PACE_SECONDS": str(args.pace),
               "SIGNOFF_HEADER_TIMEOUT_SECONDS": str(args.header_timeout)}
        server = Server("signoff", ["bot", "serve"], env, Path(tmp))
        await server.start()
        try:
            async with aiohttp.ClientSession() as session:
                card = await flood_then_critical(session, server.url, slack, args.flood, args.pace)
                async with session.get(server.url + f"/api/v1/approvals/{card['id']}",
                                       headers={"Authorization": f"Bearer {CALM}"}) as r:
                    card = await r.json()
                await asyncio.sleep(1)  # the flood token's submit bucket refills a little
                await costly_while_timed(session, server.url, card, args.seconds, args.costly)
                await half_open(session, server.url, server.port, args.half_open, args.header_timeout)
        finally:
            server.stop()
            await slack.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flood", type=int, default=150)
    parser.add_argument("--pace", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--half-open", type=int, default=200)
    parser.add_argument("--header-timeout", type=float, default=2.0)
    parser.add_argument("--costly", choices=["unique", "multiplying", "both"], default="both")
    asyncio.run(main(parser.parse_args()))
