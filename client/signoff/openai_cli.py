"""`signoff openai resume`: resume paused OpenAI Agents SDK runs with Signoff's decisions, from the command line.

    signoff openai resume --agent myapp:agent                       # myapp.approvals holds the store
    signoff openai resume --agent myapp:make_agent --approvals myapp:approvals --once
    signoff openai resume --agent myapp:agent --listen 0.0.0.0:8377 --public-url http://worker:8377/signoff/webhook

`--agent module:name`: the SDK `Agent` (or a function returning it, called once) whose gated tools the
runs use; `--approvals module:name`: the `signoff.openai.Approvals` that gated them and keeps the paused
runs (default: `approvals` in the agent's module). Every paused run of its store (or only the `--run`
ones) whose turn is decided is resumed through `Approvals.resume`: claimed on the Signoff server first, so
two resumers (here, in the agent's own process, on another machine) never both resume one turn. One line
per resumed run is printed (the run, its turn, each call approved or not and by whom), unless --quiet.

Decisions wake it at once: long-polls of the open requests, or, with `--listen HOST:PORT`, Signoff's
signed decision webhook (needs SIGNOFF_WEBHOOK_SECRET, the server's; give `Approvals(callback_url=...)`
the same URL where runs are paused, `--public-url` when Signoff reaches this machine by another name:
the cards this resumer posts for later turns carry it). The store is looked at again every
`--scan-every` seconds for runs paused meanwhile. A run whose decision cannot be used (a signature that
does not check out, a resume that failed before) is named on stderr and left as it is; the others go on.
Exit 0 when stopped (Ctrl-C, SIGTERM) or after --once; 2 when it cannot start (the message says why).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from signoff._resume_cli import (add_server, add_waking, cannot_start, imported, reporter, until_stopped,
                                 webhook_receiver)
from signoff.errors import SignoffError

if TYPE_CHECKING:
    from signoff.openai import Approvals
    from signoff.webhook import WebhookReceiver

PREFIX = "signoff openai resume"


def add_parser(sub: Any) -> None:
    oa = sub.add_parser("openai", help="OpenAI Agents SDK helpers").add_subparsers(dest="oa_command", required=True)
    resume = oa.add_parser("resume", help="resume paused OpenAI Agents SDK runs with Signoff's decisions")
    resume.add_argument("--agent", required=True, help="module:name of the Agent (or of a function returning it)")
    resume.add_argument("--approvals", help="module:name of the signoff.openai.Approvals (default: `approvals` in "
                                            "the agent's module)")
    resume.add_argument("--run", action="append", dest="runs", metavar="RUN_ID",
                        help="resume only this run (repeatable; default: every paused run of the store)")
    add_waking(resume, "runs")
    add_server(resume, "print nothing on start and per resumed run")


def load(spec: str, what: str) -> Any:
    """`module:name` -> the object (called when it is a function taking no argument), imported from the
    working directory as `python -m` would."""
    module, name = imported(spec, what)
    if not hasattr(module, name):
        raise SignoffError(f"--{what} {spec}: {module.__name__} has no {name}")
    found = getattr(module, name)
    if inspect.isfunction(found) and not inspect.signature(found).parameters:
        found = found()
    return found


class OpenAIResumer:
    """Rounds of `Approvals.resume` over a store's paused runs, woken by decisions (see the module docstring)."""

    def __init__(self, approvals: Approvals, agent: Any, *, runs: Sequence[str] | None = None,
                 scan_every: float = 5.0, webhook: WebhookReceiver | None = None) -> None:
        if runs is None and not callable(getattr(approvals.store, "ids", None)):
            raise SignoffError("the Approvals' store cannot list its runs (no ids()): name them with --run")
        if webhook is not None and approvals.callback_url is None:
            approvals.callback_url = webhook.url  # cards this resumer posts (later turns) wake it too
        self.approvals, self.agent, self.runs = approvals, agent, list(runs) if runs else None
        self.scan_every, self.webhook = scan_every, webhook
        self.waiting: list[str] = []  # runs the last round found paused and undecided
        self._heard = 0

    def paused_runs(self) -> list[str]:
        ids = self.runs if self.runs is not None else self.approvals.store.ids()  # type: ignore[attr-defined]
        found = []
        for run_id in ids:
            paused = self.approvals.paused(run_id)
            if paused is not None and paused.status == "paused":
                found.append(run_id)
        return found

    async def round(self) -> list[str]:
        """Resume every paused run whose turn is decided; the run ids resumed here."""
        self._heard = self.webhook.count if self.webhook is not None else 0
        resumed, waiting = [], []
        for run_id in self.paused_runs():
            try:
                result = await self.approvals.resume(self.agent, run_id)
            except SignoffError as exc:
                print(f"{PREFIX}: run {run_id} not resumed: {exc.message}", file=sys.stderr, flush=True)
                continue
            if result is not None:
                resumed.append(run_id)
            elif await self.approvals.decided(run_id) is False:
                waiting.append(run_id)
        self.waiting = waiting
        return resumed

    async def wait_for_decision(self, stop: asyncio.Event) -> None:
        """Until a decision may have come (a webhook, or the end of a long-poll), `scan_every` at most."""
        if self.webhook is not None:
            await self.webhook.await_beyond(self._heard, self.scan_every)
            return
        waits = [asyncio.ensure_future(self.approvals.decided(r, wait=self.scan_every)) for r in self.waiting]
        waits.append(asyncio.ensure_future(stop.wait()))
        if len(waits) == 1:
            waits.append(asyncio.ensure_future(asyncio.sleep(self.scan_every)))
        _done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)  # a failed wait is the next round's to say

    async def run(self, stop: asyncio.Event, *, once: bool = False) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            began = loop.time()
            try:
                await self.round()
            except SignoffError as exc:  # Signoff unreachable for a while: try again next round
                print(f"{PREFIX}: round failed: {exc.message}", file=sys.stderr, flush=True)
            if once:
                return
            await self.wait_for_decision(stop)
            if not self.waiting and self.webhook is None:
                continue  # the wait above already took scan_every (or stop was set)
            rest = self.scan_every / 10 - (loop.time() - began)  # never spin when every wait answers at once
            if rest > 0:
                await asyncio.sleep(rest)


def _watching(resumer: OpenAIResumer, client: Any) -> str:
    store = resumer.approvals.store
    where = f"the runs in {getattr(store, 'folder', None) or type(store).__name__}"
    which = f" ({', '.join(resumer.runs)})" if resumer.runs else ""
    how = f"; woken by webhooks at {resumer.webhook.url}" if resumer.webhook is not None else ""
    return (f"watching {where}{which} for turns Signoff decided; decisions from "
            f"{getattr(getattr(client, 'config', None), 'url', 'Signoff')}{how}")


def run(args: argparse.Namespace) -> int:
    from signoff.openai import Approvals

    report = reporter(PREFIX, args.quiet)
    try:
        agent = load(args.agent, "agent")
        approvals = load(args.approvals or f"{args.agent.partition(':')[0]}:approvals", "approvals")
        if not isinstance(approvals, Approvals):
            raise SignoffError(f"{args.approvals or 'approvals'} is a {type(approvals).__name__}, not a "
                               "signoff.openai.Approvals")
        hook = webhook_receiver(args)
    except SignoffError as exc:
        return cannot_start(PREFIX, exc)
    return until_stopped(lambda: asyncio.run(_run(args, approvals, agent, hook, report)), hook)


async def _run(args: argparse.Namespace, approvals: Approvals, agent: Any, hook: WebhookReceiver | None,
               report: Callable[[str], None] | None) -> int:
    from signoff.client import AsyncSignoffClient

    if args.url or args.token or approvals._client is None:
        approvals._client = approvals._made = AsyncSignoffClient(args.url, args.token)
    approvals.report = report
    try:
        resumer = OpenAIResumer(approvals, agent, runs=args.runs, scan_every=args.scan_every, webhook=hook)
    except SignoffError as exc:
        return cannot_start(PREFIX, exc)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if report is not None:
        report(_watching(resumer, approvals.client))
    try:
        await resumer.run(stop, once=args.once)
    finally:
        await approvals.aclose()
    return 0
