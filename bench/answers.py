"""How fast Slack gets its answer to a modal submission and to a slash command (SQLite).

    python -m bench.answers [--n 200] [--warmup 20]

Both are answered with what the listener passes to ack() (a modal's validation errors, a command's
text), so the HTTP answer has to wait for the listener's ack() and no longer (bot/process/slack_endpoint.py
`_when_acked`). Signoff runs in this process (`bot.process.app.build` on a scratch SQLite file, served by
aiohttp on 127.0.0.1), with the fake Slack Web API on loopback; the requests are signed exactly as
Slack signs them (bot/sandbox/signed.py). Timed: each request's HTTP round trip, one at a
time.
- Reject modal submitted with a reason: the listener reads the request, acks, then decides.
- `/signoff help`: the listener acks with the help text.
For contrast, Bolt's default (`process_before_response=False`) checks for the ack every 10 ms:
this bench run on the code before the change (58d36af) gave 11.8 ms p50 for submissions and
12.1 ms for commands.
Latencies in ms, nearest-rank percentiles. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench.load import Dist
from storage.migrate import upgrade
from bot.sandbox import SlackEmulator
from bot.sandbox.signed import plain_input
from bench.harness import start_app


async def run(n: int, warmup: int) -> tuple[Dist, Dist]:
    workdir = Path(tempfile.mkdtemp(prefix="signoff-bench-answers-"))
    url = f"sqlite:///{workdir / 'bench.db'}"
    await upgrade(url)
    slack = SlackEmulator()
    await slack.start()
    slack.add_channel("C1", "approvals")
    slack.add_user("U2", "bob")
    app = await start_app(url, slack)
    submissions, commands = Dist(), Dist()
    try:
        for i in range(warmup + n):
            req = await app.submit()
            await app.click(req, "U2", action="signoff_reject", user_name="bob")
            view = (await slack.wait_for("views.open", count=i + 1))[-1].args["view"]
            started = time.perf_counter()
            answer = await app.slack_client.view_submission(
                user="U2", user_name="bob", callback_id="signoff_reject", private_metadata=view["private_metadata"],
                values={"reason": {"value": plain_input("not now")}})
            took = time.perf_counter() - started
            assert answer.status == 200, answer.text
            started = time.perf_counter()
            answer = await app.slack_client.command(user="U2", text="help")
            took_command = time.perf_counter() - started
            assert answer.status == 200, answer.text
            if i >= warmup:
                submissions.add(took)
                commands.add(took_command)
    finally:
        await app.stop()
        await slack.stop()
    return submissions, commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    submissions, commands = asyncio.run(run(args.n, args.warmup))
    print(f"modal submission answered: {submissions}")
    print(f"slash command answered:    {commands}")


if __name__ == "__main__":
    main()
