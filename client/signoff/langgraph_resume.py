"""`Resumer`: resume paused LangGraph threads with Signoff's decisions, from any process on any machine.

    resumer = Resumer(make_graph, SqliteSaver(sqlite3.connect("checkpoints.db", check_same_thread=False)),
                      channel="C0123ABCD")
    resumer.run()            # or: signoff langgraph resume --graph myapp.agent:make_graph --db checkpoints.db

It finds threads paused at interrupts Signoff answers (see `signoff.langgraph_hitl`), posts the
cards of any that have none yet, waits for the decisions, and calls `graph.invoke(Command(resume=
{interrupt_id: value, ...}), {"configurable": {"thread_id": ...}})` with the application's own graph
and checkpointer once every interrupt of the thread is decided. The process that hit the interrupt
may be long gone: only the checkpointer holds the thread. `AsyncResumer` (signoff.langgraph_async)
does the same for graphs run with `ainvoke` and asyncio checkpointers: both run `Resuming`'s steps.

Invariants:
- Exactly once, across machines: a resume is claimed on the Signoff server first (`claim_resume`, a
  key per thread and set of interrupts and requests, see `resume_key`); the holder re-reads the
  thread and resumes only if it is still paused at those interrupts, renewing its lease while the
  graph runs, and finishes the claim `done` (or `failed`, with the error: not retried by itself).
  Two resumers never both resume; a finished claim is never applied again.
- A resume runs with the claim's key in its checkpoints' metadata (`CLAIM_META`). A resumer killed
  mid-way leaves a thread past its interrupt, not at its end, whose claim is still `resuming`; once
  its lease runs out any resumer takes the claim over and continues the graph from its last
  checkpoint (`invoke(None)`: LangGraph re-runs the step that was cut short). A thread stopped
  mid-way without such a key (its own process may be running it) is left alone.
- A thread paused at anything Signoff does not answer is left alone, and so is its whole resume.
- New paused threads are found by re-reading the checkpointer (it cannot notify) every
  `scan_every` seconds at most. Decisions wake the resumer at once: long-polls of the open requests,
  or, with a `webhook` receiver, Signoff's signed webhook (requests the resumer posts carry its
  `callback_url`; give `approval()` the same). A round that brought no decision is followed by the
  next no sooner than `scan_every` after it began: the loop never spins.
- A request whose card Slack refused for good is not waited for (the server answers it at once):
  one WARNING names it, its thread and the fix; the resumer cancels it and resumes the thread as
  not approved.
- Receipts: the LangChain HumanInTheLoopMiddleware tool calls a person approved report what they did
  (`ran` / `failed`, from their ToolMessages) once the resume returned (signoff.langgraph_receipts).
- Signed: every decision is read through `final_decision`, which checks the server's Ed25519 signature:
  a forged, altered or replayed one raises `SignatureInvalid` in the round, and the thread is not resumed.
- `report` (the CLI passes `print` unless --quiet) gets one line when the resumer starts (what it
  watches) and one per thread it resumes (the thread, each request, approved or not and why).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from signoff._protocol import undeliverable
from signoff._steps import Steps, call, run
from signoff.errors import SignatureInvalid, SignoffError, SignoffRequestError
from signoff.langgraph_hitl import CARD_OPTIONS, requests_for, resume_value
from signoff.langgraph_receipts import approved_actions, pending_calls, what_ran
from signoff.langgraph_threads import latest
from signoff.models import final_decision
from signoff.resumes import DEFAULT_LEASE_SECONDS, ResumeClaim, ResumeTaken, default_owner

if TYPE_CHECKING:
    from signoff.client import SignoffClient
    from signoff.webhook import WebhookReceiver

log = logging.getLogger("signoff.langgraph")

CLAIM_META = "signoff_resume"  # the checkpoint metadata key that names the claim a resume ran under
KEY_MAX = 200
MIN_LEASE, MAX_LEASE = 5, 3600


def resume_key(thread_id: str, interrupt_ids: Sequence[str], request_ids: Sequence[str]) -> str:
    """The claim key of one resume: `langgraph:<thread>:<digest of its interrupts and requests>`."""
    digest = hashlib.sha256("|".join([thread_id, *sorted(interrupt_ids), "", *sorted(request_ids)]).encode())
    key = f"langgraph:{thread_id}:{digest.hexdigest()[:24]}"
    return key if len(key) <= KEY_MAX else f"langgraph:sha256:{digest.hexdigest()}"


@dataclass(frozen=True)
class Paused:
    """A thread paused at interrupts Signoff answers: each interrupt with the requests that answer it."""

    thread_id: str
    parts: tuple[tuple[Any, tuple[str, ...]], ...]

    @property
    def interrupt_ids(self) -> tuple[str, ...]:
        return tuple(i.id for i, _ in self.parts)

    @property
    def request_ids(self) -> tuple[str, ...]:
        return tuple(r for _, ids in self.parts for r in ids)

    @property
    def key(self) -> str:
        return resume_key(self.thread_id, self.interrupt_ids, self.request_ids)


@dataclass(frozen=True)
class Scan:
    paused: tuple[Paused, ...] = ()
    stuck: tuple[tuple[str, str, str | None], ...] = ()  # (thread, claim key, latest checkpoint): left mid-way


def thread_config(thread_id: str, key: str | None = None) -> dict[str, Any]:
    """The thread's config; with `key`, the claim's key goes into every checkpoint the run writes."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id}}
    if key is not None:
        config["metadata"] = {CLAIM_META: key}
    return config


def check_card(card: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(card) - set(CARD_OPTIONS))
    if "claims" in unknown:
        raise SignoffError("claims= is gone: resume claims are held by the Signoff server, so every resumer of "
                           "these threads shares them wherever it runs; drop the argument")
    if unknown:
        raise SignoffError(f"unknown option(s) {', '.join(unknown)}: the card options are {', '.join(CARD_OPTIONS)}")
    return dict(card)


class Resuming:
    """What a resumer decides, as steps (signoff._steps) on "client" (a Signoff client), "graph" (its
    `get_state`) and "driver" (`threads()`, `invoke_holding(claim, command, config)`)."""

    def __init__(self, card: Mapping[str, Any], *, owner: str, lease_seconds: int,
                 report: Callable[[str], None]) -> None:
        if not MIN_LEASE <= lease_seconds <= MAX_LEASE:
            raise SignoffError(f"lease_seconds must be {MIN_LEASE} to {MAX_LEASE} (the server's bounds), "
                               f"not {lease_seconds}")
        self.card, self.owner, self.lease_seconds, self.report = dict(card), owner, lease_seconds, report
        self.quiet: dict[str, str] = {}  # thread -> latest checkpoint seen needing nothing from us
        self.known: dict[str, tuple[str, ...]] = {}  # interrupt id -> the requests that answer it
        self.waiting: list[str] = []  # request ids the last round found still open

    def scan(self) -> Steps[Scan]:
        """Threads paused at interrupts that Signoff answers (posting the cards of those that have none),
        and threads a resume left mid-way."""
        paused: list[Paused] = []
        stuck: list[tuple[str, str, str | None]] = []
        threads: dict[str, str | None] = yield call("driver", "threads")
        for thread_id, newest in threads.items():
            if newest is not None and self.quiet.get(thread_id) == newest:
                continue  # unchanged since we saw it needed nothing from us
            state = yield call("graph", "get_state", thread_config(thread_id))
            key = (state.metadata or {}).get(CLAIM_META)
            if not state.interrupts and state.next and isinstance(key, str):
                stuck.append((thread_id, key, newest))
                continue
            parts = []
            for item in state.interrupts:
                ids = self.known.get(item.id)
                if ids is None:
                    try:
                        asked = yield from requests_for(thread_id, item, self.card)
                    except SignoffRequestError as exc:  # e.g. post_cards used other card options: say so
                        hint = ("; its card was posted with other card options: give the resumer the same "
                                "channel, approvers, risk, requested_by, timing and callback_url as post_cards "
                                "(--channel, --approver, --risk, --requested-by; with --listen, post_cards' "
                                "callback_url is the resumer's webhook URL)"
                                if exc.error_code == "idempotency_key_reused" else "")
                        log.warning("cannot ask about thread %s: %s%s", thread_id, exc, hint)
                        break
                    if asked is None:
                        break  # an interrupt someone else answers: the whole resume is theirs
                    ids = self.known[item.id] = tuple(asked)
                parts.append((item, ids))
            else:
                if parts:
                    paused.append(Paused(thread_id, tuple(parts)))
                    continue
            # Skipped until it changes: a finished thread, or one paused at someone else's interrupt.
            # Not one that is running: its interrupt is written to the same checkpoint, later.
            if newest is not None and (state.interrupts or not state.next):
                self.quiet[thread_id] = newest
        return Scan(tuple(paused), tuple(stuck))

    def resume_ready(self) -> Steps[list[str]]:
        """Resume every paused thread whose requests have all ended, and continue those a resumer left
        mid-way whose lease ran out; the thread ids this round resumed."""
        found = yield from self.scan()
        resumed = []
        for thread_id, key, newest in found.stuck:
            if (yield from self._continue(thread_id, key, newest)):
                resumed.append(thread_id)
        waiting: list[str] = []
        for paused in found.paused:
            bodies = {}
            for rid in paused.request_ids:
                bodies[rid] = yield call("client", "get", rid)
            try:
                for rid, body in bodies.items():
                    refused = undeliverable(body) if final_decision(body) is None else None
                    if refused is not None:  # nobody can see it: not approved. The resumer asked, so it cancels
                        yield call("client", "cancel", rid, refused.cancel_reason)  # (a decision first stands)
                        bodies[rid] = yield call("client", "get", rid)
                        log.warning("thread %s resumes as not approved: %s The request was cancelled.",
                                    paused.thread_id, refused.message)
                open_ids = [rid for rid, body in bodies.items() if final_decision(body) is None]
            except SignatureInvalid as forged:  # nothing of it is used: the thread stays paused, the others go on
                log.warning("thread %s is not resumed: %s", paused.thread_id, forged.message)
                continue
            if open_ids:
                waiting.extend(open_ids)
            elif (yield from self._resume(paused, bodies)):
                resumed.append(paused.thread_id)
        self.waiting = waiting
        return resumed

    def _resume(self, paused: Paused, bodies: Mapping[str, Any]) -> Steps[bool]:
        from langgraph.types import Command

        claim = yield call("client", "claim_resume", paused.key, self.owner, lease_seconds=self.lease_seconds,
                           request_ids=paused.request_ids)
        if claim is None:
            return False  # another resumer has it, or it was applied already
        state = yield call("graph", "get_state", thread_config(paused.thread_id))
        if not set(paused.interrupt_ids) <= {i.id for i in state.interrupts}:
            yield from self._finish(claim, "done")  # resumed by someone before us: nothing left to do
            return False
        values = {item.id: resume_value(item, [bodies[r] for r in ids]) for item, ids in paused.parts}
        receipts = approved_actions(paused.parts, bodies, pending_calls(state))
        if not (yield from self._invoke(claim, Command(resume=values), paused.thread_id)):
            return False
        if receipts:  # what the approved tool calls did, from their ToolMessages
            after = yield call("graph", "get_state", thread_config(paused.thread_id))
            for receipt, status, content in what_ran(receipts, after):
                yield call("client", "report_quietly", receipt.request_id, status, params=receipt.params,
                           item=receipt.item, **({"result": content} if status == "ran" else {"error": str(content)}))
        outcomes = "; ".join(f"{rid} {outcome_words(bodies[rid])}" for rid in paused.request_ids)
        self.report(f"resumed thread {paused.thread_id}: {outcomes}")
        return True

    def _continue(self, thread_id: str, key: str, newest: str | None) -> Steps[bool]:
        """Finish a resume whose resumer stopped mid-way, once its lease ran out (the server says when)."""
        held = yield call("client", "get_resume", key)
        if held is None or held.state != "resuming":
            if newest is not None:
                self.quiet[thread_id] = newest  # failed (kept, with its error), or not this token's: until it changes
            return False
        claim = yield call("client", "claim_resume", key, self.owner, lease_seconds=self.lease_seconds)
        if claim is None:
            return False  # its resumer is alive (it renews its lease), or another took it over first
        state = yield call("graph", "get_state", thread_config(thread_id))
        if state.interrupts or not state.next:
            yield from self._finish(claim, "done")  # it got to its end (or its next pause) after all
            return False
        log.info("continuing %s, left mid-way by a resumer that stopped (%s)", thread_id, held.owner)
        if not (yield from self._invoke(claim, None, thread_id)):
            return False
        self.report(f"continued thread {thread_id}, left mid-way by resumer {held.owner}")
        return True

    def _invoke(self, claim: ResumeClaim, command: Any, thread_id: str) -> Steps[bool]:
        try:
            yield call("driver", "invoke_holding", claim, command, thread_config(thread_id, claim.key))
        except Exception as exc:
            log.exception("resuming %s failed", thread_id)
            yield from self._finish(claim, "failed", f"{type(exc).__name__}: {exc}")
            return False
        yield from self._finish(claim, "done")
        return True

    def _finish(self, claim: ResumeClaim, state: str, error: str | None = None) -> Steps[None]:
        try:
            yield call("client", "finish_resume", claim, state, error)
        except ResumeTaken as lost:
            log.warning("resume %s was taken over by %s while this resumer held it (it ran longer than its lease "
                        "and could not renew it); another resumer may have resumed it too", claim.key, lost.owner)


class Resumer:
    """Resume threads of `graph_factory`'s graph (called with `checkpointer` if it takes an argument).

    `card`: channel, approvers, risk, requested_by, timing, callback_url for cards this resumer posts
    (HumanInTheLoopMiddleware interrupts); give `post_cards` the same, or its submit is a conflict.
    `lease_seconds`: how long a claim outlives a resumer that dies (renewed every third of it while
    the graph runs). `owner`: this resumer's name on its claims (default `host|pid|random`).
    `webhook`: a started `signoff.webhook.WebhookReceiver`; decisions then wake the resumer through
    it instead of long-polls (the cards it posts carry its `url`).
    """

    def __init__(self, graph_factory: Callable[..., Any], checkpointer: Any = None, *,
                 client: SignoffClient | None = None, scan_every: float = 5.0,
                 report: Callable[[str], None] | None = None, lease_seconds: int = DEFAULT_LEASE_SECONDS,
                 owner: str | None = None, webhook: WebhookReceiver | None = None, **card: Any) -> None:
        card = check_card(card)
        takes_arg = bool(inspect.signature(graph_factory).parameters)
        self.graph = graph_factory(checkpointer) if takes_arg else graph_factory()
        chosen = checkpointer if checkpointer is not None else getattr(self.graph, "checkpointer", None)
        if chosen is None:
            raise SignoffError("the graph has no checkpointer: compile it with one or pass it to Resumer")
        self.checkpointer: Any = chosen
        self._owns_client = client is None
        if client is None:
            from signoff.client import SignoffClient

            client = SignoffClient()  # SIGNOFF_URL / SIGNOFF_TOKEN
        self.client = client
        self.webhook = webhook
        if webhook is not None:
            card.setdefault("callback_url", webhook.url)
        self.scan_every = scan_every
        self.report = report or (lambda _line: None)
        self.resuming = Resuming(card, owner=owner or default_owner(), lease_seconds=lease_seconds,
                                 report=self.report)
        self._targets = {"client": self.client, "graph": self.graph, "driver": self}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="signoff-wait")
        self._polls: dict[str, concurrent.futures.Future[Any]] = {}
        self._heard = 0  # webhook deliveries seen when the last round began

    @property
    def owner(self) -> str:
        return self.resuming.owner

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._owns_client:
            self.client.close()

    def describe(self) -> str:
        return describe(self.checkpointer)

    # -- what the steps call ("driver") ---------------------------------------------------------

    def threads(self) -> dict[str, str | None]:
        """Every thread the checkpointer holds -> its latest checkpoint id (None where it cannot say cheaply)."""
        return latest(self.checkpointer)

    def invoke_holding(self, claim: ResumeClaim, command: Any, config: dict[str, Any]) -> Any:
        """Run the graph on, renewing the claim every third of its lease until the run returns."""
        stop = threading.Event()
        threading.Thread(target=self._renew, args=(claim, stop), name="signoff-renew", daemon=True).start()
        try:
            # durability="sync": every step is on disk before the next starts, so a resumer killed
            # mid-way leaves the thread exactly where the next resumer can pick it up.
            return self.graph.invoke(command, config, durability="sync")
        finally:
            stop.set()

    def _renew(self, claim: ResumeClaim, stop: threading.Event) -> None:
        while not stop.wait(claim.lease_seconds / 3):
            try:
                self.client.renew_resume(claim)
            except ResumeTaken as lost:
                log.warning("lost the claim on %s to %s while resuming it", claim.key, lost.owner)
                return
            except SignoffError as exc:  # Signoff unreachable: the lease still runs; try again
                log.warning("could not renew the claim on %s: %s", claim.key, exc)

    # -- rounds ---------------------------------------------------------------------------------

    def resume_ready(self) -> list[str]:
        """One round: resume every paused thread whose requests have all ended; the thread ids resumed."""
        self._heard = self.webhook.count if self.webhook is not None else 0
        return run(self.resuming.resume_ready(), self._targets)

    def run(self, *, stop: threading.Event | None = None, once: bool = False) -> None:
        """Resume threads as their decisions arrive, until `stop` is set (or after one round with `once`)."""
        stop = stop or threading.Event()
        self.report(watching(self.describe(), self.scan_every, once, self.client, self.webhook))
        while not stop.is_set():
            began = time.monotonic()
            try:
                self.resume_ready()
            except SignoffError as exc:  # Signoff unreachable for a while: try again next round
                log.warning("resume round failed: %s", exc)
            if once:
                return
            if not self.wait_for_decision(stop):
                stop.wait(max(0.0, self.scan_every - (time.monotonic() - began)))

    def wait_for_decision(self, stop: threading.Event | None = None) -> bool:
        """Wait for a decision on the requests the last round waited on; True as soon as one ends.

        With a webhook: its next delivery. Otherwise long-polls of all of them at once. False after
        `scan_every` seconds without a decision: time to look for new paused threads.
        """
        if self.webhook is not None:
            return self.webhook.wait_beyond(self._heard, self.scan_every, stop)
        waiting = self.resuming.waiting
        for rid in waiting:
            if rid not in self._polls or self._polls[rid].done():
                self._polls[rid] = self._pool.submit(self.client.get, rid, wait=self.scan_every)
        polls = [self._polls[rid] for rid in waiting]
        self._polls = {rid: f for rid, f in self._polls.items() if rid in waiting or not f.done()}
        if not polls:  # nothing to long-poll: look at the checkpointer again after a while
            (stop or threading.Event()).wait(self.scan_every)
            return False
        for done in concurrent.futures.as_completed(polls):
            try:
                if final_decision(done.result()) is not None:
                    return True
            except SignoffError as exc:
                log.warning("waiting for a decision failed: %s", exc)
        return False


def describe(checkpointer: Any) -> str:
    """The checkpointer, in words: its SQLite file where it has one."""
    import sqlite3

    conn = getattr(checkpointer, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        for _seq, name, path in conn.execute("PRAGMA database_list").fetchall():
            if name == "main" and path:
                return f"the checkpoints in {path}"
    return f"the checkpointer {type(checkpointer).__name__}"


def watching(what: str, scan_every: float, once: bool, client: Any, webhook: WebhookReceiver | None) -> str:
    """The line a resumer reports when it starts."""
    how = f"; woken by webhooks at {webhook.url}" if webhook is not None else ""
    return (f"watching {what} for threads paused at a Signoff interrupt "
            f"({'one round' if once else f'every {scan_every:g} s, until stopped'}); "
            f"decisions from {getattr(getattr(client, 'config', None), 'url', 'Signoff')}{how}")


def outcome_words(body: Any) -> str:
    """A request's end in a few words: "approved by alice", "rejected by bob: too late", "expired"."""
    decision = final_decision(body)
    if decision is None:
        return "still pending"
    who = f" by {decision.decider}" if decision.decider else ""
    if decision.items:  # a batch: each action's own end ("approved by alice: send_email edited, delete_file rejected")
        return f"{decision.outcome}{who}: " + ", ".join(_item_words(item, decision.decider) for item in decision.items)
    if decision.outcome == "approved":
        return f"approved{who}{decision.edits_words}"
    why = decision.comment
    return f"not approved ({decision.outcome}{who}){f': {why}' if why else ''}"


def _item_words(item: Any, batch_decider: str | None) -> str:
    """One action of a batch: "send_email approved", "send_email edited", "delete_file rejected by bob"."""
    said = "edited" if item.outcome == "approved" and item.changes else (item.outcome or "undecided")
    by = item.decider
    return f"{item.name} {said}" + (f" by {by}" if by and by != batch_decider else "")


def load_factory(spec: str) -> Callable[..., Any]:
    """`module:function` -> the function (the CLI's --graph), imported from the working directory as
    `python -m` would (signoff._resume_cli.imported)."""
    from signoff._resume_cli import imported

    module, name = imported(spec, "graph", "module:function")
    factory = getattr(module, name, None)
    if not callable(factory):
        raise SignoffError(f"{spec} is not a function in {module.__name__}")
    return cast("Callable[..., Any]", factory)
