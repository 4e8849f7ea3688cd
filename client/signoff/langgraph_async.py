"""`AsyncResumer`: the `Resumer` for graphs run with `ainvoke` / `astream` on an asyncio checkpointer.

    async with AsyncSqliteSaver.from_conn_string("checkpoints.db") as saver:
        resumer = AsyncResumer(build_graph, saver, client=AsyncSignoffClient())
        await resumer.run()          # or: signoff langgraph resume --async --graph myapp:build_graph ...

The same decisions as the blocking `Resumer` (it runs `Resuming`'s steps, signoff.langgraph_resume,
and its invariants hold here word for word) on the event loop: the graph is read with `aget_state`
and resumed with `ainvoke`, Signoff is reached through an `AsyncSignoffClient`, the claim is renewed
by a task while the graph runs, and decisions are awaited as long-polls of every open request at
once (tasks kept across rounds), or through a `WebhookReceiver`. Nodes may be `async def` (call
`aapproval` / `aask` in them) or plain functions (LangGraph runs those in a thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from signoff._steps import arun
from signoff.errors import SignoffError
from signoff.langgraph_resume import Resuming, check_card, describe, watching
from signoff.langgraph_threads import alatest
from signoff.models import final_decision
from signoff.resumes import DEFAULT_LEASE_SECONDS, ResumeClaim, ResumeTaken, default_owner

if TYPE_CHECKING:
    from signoff.client import AsyncSignoffClient
    from signoff.webhook import WebhookReceiver

log = logging.getLogger("signoff.langgraph")


class AsyncResumer:
    """Resume threads of `graph_factory`'s graph (called with `checkpointer` if it takes an argument), on
    asyncio. The options are `Resumer`'s; `client` is an `AsyncSignoffClient` (default: one made from
    SIGNOFF_URL / SIGNOFF_TOKEN, closed by `aclose`)."""

    def __init__(self, graph_factory: Callable[..., Any], checkpointer: Any = None, *,
                 client: AsyncSignoffClient | None = None, scan_every: float = 5.0,
                 report: Callable[[str], None] | None = None, lease_seconds: int = DEFAULT_LEASE_SECONDS,
                 owner: str | None = None, webhook: WebhookReceiver | None = None, **card: Any) -> None:
        card = check_card(card)
        takes_arg = bool(inspect.signature(graph_factory).parameters)
        self.graph = graph_factory(checkpointer) if takes_arg else graph_factory()
        chosen = checkpointer if checkpointer is not None else getattr(self.graph, "checkpointer", None)
        if chosen is None:
            raise SignoffError("the graph has no checkpointer: compile it with one or pass it to AsyncResumer")
        self.checkpointer: Any = chosen
        self._owns_client = client is None
        if client is None:
            from signoff.client import AsyncSignoffClient

            client = AsyncSignoffClient()
        if not inspect.iscoroutinefunction(getattr(client, "get", None)):
            raise SignoffError("AsyncResumer needs an AsyncSignoffClient (a SignoffClient is for Resumer)")
        self.client = client
        self.webhook = webhook
        if webhook is not None:
            card.setdefault("callback_url", webhook.url)
        self.scan_every = scan_every
        self.report = report or (lambda _line: None)
        self.resuming = Resuming(card, owner=owner or default_owner(), lease_seconds=lease_seconds,
                                 report=self.report)
        self._targets = {"client": self.client, "graph": SimpleNamespace(get_state=self.graph.aget_state),
                         "driver": self}
        self._polls: dict[str, asyncio.Task[Any]] = {}
        self._heard = 0

    @property
    def owner(self) -> str:
        return self.resuming.owner

    async def aclose(self) -> None:
        for task in self._polls.values():
            task.cancel()
        await asyncio.gather(*self._polls.values(), return_exceptions=True)
        self._polls.clear()
        if self._owns_client:
            await self.client.aclose()

    def describe(self) -> str:
        return describe(self.checkpointer)

    # -- what the steps call ("driver") ---------------------------------------------------------

    async def threads(self) -> dict[str, str | None]:
        return await alatest(self.checkpointer)

    async def invoke_holding(self, claim: ResumeClaim, command: Any, config: dict[str, Any]) -> Any:
        """Run the graph on (`ainvoke`, every step on disk before the next), renewing the claim meanwhile."""
        renewing = asyncio.create_task(self._renew(claim))
        try:
            return await self.graph.ainvoke(command, config, durability="sync")
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _renew(self, claim: ResumeClaim) -> None:
        while True:
            await asyncio.sleep(claim.lease_seconds / 3)
            try:
                await self.client.renew_resume(claim)
            except ResumeTaken as lost:
                log.warning("lost the claim on %s to %s while resuming it", claim.key, lost.owner)
                return
            except SignoffError as exc:
                log.warning("could not renew the claim on %s: %s", claim.key, exc)

    # -- rounds ---------------------------------------------------------------------------------

    async def resume_ready(self) -> list[str]:
        """One round: resume every paused thread whose requests have all ended; the thread ids resumed."""
        self._heard = self.webhook.count if self.webhook is not None else 0
        return await arun(self.resuming.resume_ready(), self._targets)

    async def run(self, *, stop: asyncio.Event | None = None, once: bool = False) -> None:
        """Resume threads as their decisions arrive, until `stop` is set (or after one round with `once`)."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        self.report(watching(self.describe(), self.scan_every, once, self.client, self.webhook))
        while not stop.is_set():
            began = loop.time()
            try:
                await self.resume_ready()
            except SignoffError as exc:
                log.warning("resume round failed: %s", exc)
            if once:
                return
            if not await self.wait_for_decision(stop):
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, self.scan_every - (loop.time() - began)))

    async def wait_for_decision(self, stop: asyncio.Event | None = None) -> bool:
        """`Resumer.wait_for_decision`, awaited: True as soon as a decision the last round waited on arrives;
        False after `scan_every` seconds, or as soon as `stop` is set."""
        stop = stop or asyncio.Event()
        waiting = self._heard_from() if self.webhook is not None else self._polled(stop)
        waited, stopped = asyncio.ensure_future(waiting), asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({waited, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (waited, stopped):
            task.cancel()
        await asyncio.gather(waited, stopped, return_exceptions=True)
        return waited in done and not waited.cancelled() and waited.result()

    async def _heard_from(self) -> bool:
        assert self.webhook is not None
        return await self.webhook.await_beyond(self._heard, self.scan_every)

    async def _polled(self, stop: asyncio.Event) -> bool:
        waiting = self.resuming.waiting
        for rid in waiting:
            if rid not in self._polls or self._polls[rid].done():
                self._polls[rid] = asyncio.create_task(self.client.get(rid, wait=self.scan_every))
        polls = {self._polls[rid] for rid in waiting}
        self._polls = {rid: t for rid, t in self._polls.items() if rid in waiting or not t.done()}
        if not polls:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.scan_every)
            return False
        for done in asyncio.as_completed(polls):
            try:
                if final_decision(await done) is not None:
                    return True
            except SignoffError as exc:
                log.warning("waiting for a decision failed: %s", exc)
        return False
