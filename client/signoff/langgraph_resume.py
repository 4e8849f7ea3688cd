"""`Resumer`: resume paused LangGraph threads with Signoff's decisions, from any process.

    resumer = Resumer(make_graph, SqliteSaver(sqlite3.connect("checkpoints.db", check_same_thread=False)),
                      channel="C0123ABCD")
    resumer.run()            # or: signoff langgraph resume --graph myapp.agent:make_graph --db checkpoints.db

It finds threads paused at interrupts Signoff answers (see `signoff.langgraph_hitl`), posts the
cards of any that have none yet, waits for the decisions (long-polls, several at once), and calls
`graph.invoke(Command(resume={interrupt_id: value, ...}), {"configurable": {"thread_id": ...}})`
with the application's own graph and checkpointer once every interrupt of the thread is decided.
The process that hit the interrupt may be long gone: only the checkpointer holds the thread.

Invariants:
- Exactly once: a resume is claimed first (`Claims`, a row per thread and set of requests); the
  claim holder re-reads the thread and resumes only if it is still paused at those interrupts.
  Two resumers never both resume; a finished claim is never applied again.
- A resumer killed mid-way leaves a `resuming` claim whose owner is gone: the next scan (here or
  in another process) takes it over and either resumes (still paused there) or, when the resume
  had got past the interrupt, continues the graph from its last checkpoint (`invoke(None)`).
- A thread paused at anything Signoff does not answer is left alone, and so is its whole resume.
- New paused threads are found by re-reading the checkpointer (it cannot notify) every
  `scan_every` seconds at most, while the long-polls wait for decisions. A round that brought no
  decision (long-polls back early, Signoff restarting) is followed by the next no sooner than
  `scan_every` after it began: the loop never spins.
- A request whose card Slack refused for good is not long-polled (the server answers it at once):
  one WARNING names it, its thread and the fix; the resumer cancels it and resumes the thread as
  not approved.
- `report` (the CLI passes `print` unless --quiet) gets one line when the resumer starts (what it
  watches) and one per thread it resumes (the thread, each request, approved or not and why).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import inspect
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from signoff._protocol import undeliverable
from signoff.errors import SignoffError, SignoffRequestError
from signoff.langgraph_claims import Claims
from signoff.langgraph_hitl import requests_for, resume_value
from signoff.models import final_decision

if TYPE_CHECKING:
    from signoff.client import SignoffClient

log = logging.getLogger("signoff.langgraph")


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
        text = "|".join([self.thread_id, *sorted(self.interrupt_ids), *sorted(self.request_ids)])
        return hashlib.sha256(text.encode()).hexdigest()


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


class Resumer:
    """Resume threads of `graph_factory`'s graph (called with `checkpointer` if it takes an argument).

    `card`: channel, approvers, risk, requested_by, timing for cards this resumer posts
    (HumanInTheLoopMiddleware interrupts); give `post_cards` the same, or its submit is a conflict.
    """

    def __init__(self, graph_factory: Callable[..., Any], checkpointer: Any = None, *,
                 client: SignoffClient | None = None, claims: Claims | None = None, scan_every: float = 5.0,
                 report: Callable[[str], None] | None = None, **card: Any) -> None:
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
        self.claims = claims or Claims.beside(self.checkpointer)
        self.scan_every = scan_every
        self.card = card
        self.report = report or (lambda _line: None)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="signoff-wait")
        self._quiet: dict[str, str] = {}  # thread -> latest checkpoint seen not waiting on Signoff
        self._known: dict[str, tuple[str, ...]] = {}  # interrupt id -> the requests that answer it
        self._waiting: list[str] = []  # request ids the last round found still open
        self._polls: dict[str, concurrent.futures.Future[Any]] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._owns_client:
            self.client.close()

    def describe(self) -> str:
        """The checkpointer, in words: its SQLite file where it has one."""
        conn = getattr(self.checkpointer, "conn", None)
        if isinstance(conn, sqlite3.Connection):
            for _seq, name, path in conn.execute("PRAGMA database_list").fetchall():
                if name == "main" and path:
                    return f"the checkpoints in {path}"
        return f"the checkpointer {type(self.checkpointer).__name__}"

    # -- finding paused threads ---------------------------------------------------------

    def threads(self) -> dict[str, str | None]:
        """Every thread the checkpointer holds -> its latest checkpoint id (None where it cannot say cheaply)."""
        conn, lock = getattr(self.checkpointer, "conn", None), getattr(self.checkpointer, "lock", None)
        if isinstance(conn, sqlite3.Connection) and lock is not None:  # SqliteSaver: ask SQL, load no blobs
            try:
                with lock:
                    rows = conn.execute("SELECT thread_id, MAX(checkpoint_id) FROM checkpoints "
                                        "WHERE checkpoint_ns = '' GROUP BY thread_id").fetchall()
                return {str(t): str(c) for t, c in rows}
            except sqlite3.OperationalError:  # no checkpoint written yet: the saver makes its tables lazily
                return {}
        found: dict[str, str | None] = {}
        for item in self.checkpointer.list(None):
            found.setdefault(str(item.config["configurable"]["thread_id"]), None)
        return found

    def paused(self) -> list[Paused]:
        """Threads paused at interrupts that Signoff answers; posts the cards of those that have none."""
        found = []
        for thread_id, latest in self.threads().items():
            if latest is not None and self._quiet.get(thread_id) == latest:
                continue  # unchanged since we saw it was not waiting on Signoff
            state = self.graph.get_state(_config(thread_id))
            parts = []
            for item in state.interrupts:
                ids = self._known.get(item.id)
                if ids is None:
                    try:
                        asked = requests_for(self.client, thread_id, item, self.card)
                    except SignoffRequestError as exc:  # e.g. post_cards used other card options: say so once
                        log.warning("cannot ask about thread %s: %s", thread_id, exc)
                        break
                    if asked is None:
                        break  # an interrupt someone else answers: the whole resume is theirs
                    ids = self._known[item.id] = tuple(asked)
                parts.append((item, ids))
            else:
                if parts:
                    found.append(Paused(thread_id, tuple(parts)))
                    continue
            # Skipped until it changes: a finished thread, or one paused at someone else's interrupt.
            # Not one that is running: its interrupt is written to the same checkpoint, later.
            if latest is not None and (state.interrupts or not state.next):
                self._quiet[thread_id] = latest
        return found

    # -- resuming -------------------------------------------------------------------------

    def resume_ready(self) -> list[str]:
        """Resume every paused thread whose requests have all ended; the thread ids this call resumed."""
        resumed = self._recover()
        waiting: list[str] = []
        for paused in self.paused():
            bodies = {rid: self.client.get(rid) for rid in paused.request_ids}
            for rid, body in bodies.items():
                refused = undeliverable(body) if final_decision(body) is None else None
                if refused is not None:  # nobody can see it: not approved. The resumer asked, so it cancels
                    self.client.cancel(rid, refused.cancel_reason)  # (a decision that came first stands)
                    bodies[rid] = self.client.get(rid)
                    log.warning("thread %s resumes as not approved: %s The request was cancelled.",
                                paused.thread_id, refused.message)
            open_ids = [rid for rid, body in bodies.items() if final_decision(body) is None]
            if open_ids:
                waiting.extend(open_ids)
            elif self._resume(paused, bodies):
                resumed.append(paused.thread_id)
        self._waiting = waiting
        return resumed

    def run(self, *, stop: threading.Event | None = None, once: bool = False) -> None:
        """Resume threads as their decisions arrive, until `stop` is set (or after one round with `once`)."""
        stop = stop or threading.Event()
        self.report(f"watching {self.describe()} for threads paused at a Signoff interrupt "
                    f"({'one round' if once else f'every {self.scan_every:g} s, until stopped'}); "
                    f"decisions from {getattr(getattr(self.client, 'config', None), 'url', 'Signoff')}")
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
        """Long-poll the requests the last round waited on, all at once; True as soon as one ends.

        False after `scan_every` seconds without a decision: time to look for new paused threads.
        """
        for rid in self._waiting:
            if rid not in self._polls or self._polls[rid].done():
                self._polls[rid] = self._pool.submit(self.client.get, rid, wait=self.scan_every)
        polls = [self._polls[rid] for rid in self._waiting]
        self._polls = {rid: f for rid, f in self._polls.items() if rid in self._waiting or not f.done()}
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

    def _resume(self, paused: Paused, bodies: dict[str, Any]) -> bool:
        from langgraph.types import Command

        if not self.claims.claim(paused.key, paused.thread_id, paused.interrupt_ids):
            return False  # another resumer has it, or it was applied already
        config = _config(paused.thread_id)
        current = {i.id for i in self.graph.get_state(config).interrupts}
        if not set(paused.interrupt_ids) <= current:
            self.claims.finish(paused.key)  # resumed by someone before us: nothing left to do
            return False
        values = {item.id: resume_value(item, [bodies[r] for r in ids]) for item, ids in paused.parts}
        if not self._invoke(paused.key, Command(resume=values), config):
            return False
        outcomes = "; ".join(f"{rid} {outcome_words(bodies[rid])}" for rid in paused.request_ids)
        self.report(f"resumed thread {paused.thread_id}: {outcomes}")
        return True

    def _invoke(self, key: str, command: Any, config: dict[str, Any]) -> bool:
        try:
            # durability="sync": every step is on disk before the next starts, so a resumer killed
            # mid-way leaves the thread exactly where the next resumer can pick it up.
            self.graph.invoke(command, config, durability="sync")
        except Exception as exc:
            log.exception("resuming %s failed", config["configurable"]["thread_id"])
            self.claims.finish(key, error=f"{type(exc).__name__}: {exc}")
            return False
        self.claims.finish(key)
        return True

    def _recover(self) -> list[str]:
        """Finish what a dead resumer left half done; the threads this continued."""
        continued = []
        for claim in self.claims.stale():
            if not self.claims.claim(claim.key, claim.thread_id, claim.interrupt_ids):
                continue
            config = _config(claim.thread_id)
            state = self.graph.get_state(config)
            if set(claim.interrupt_ids) & {i.id for i in state.interrupts}:
                self.claims.release(claim.key)  # never got past the interrupt: the normal path resumes it
            elif state.next and not state.interrupts:
                log.info("continuing %s, left half resumed by a resumer that died", claim.thread_id)
                if self._invoke(claim.key, None, config):
                    continued.append(claim.thread_id)
            else:
                self.claims.finish(claim.key)
        return continued


def outcome_words(body: Any) -> str:
    """A request's end in a few words: "approved by alice", "rejected by bob: too late", "expired"."""
    decision = final_decision(body)
    if decision is None:
        return "still pending"
    who = f" by {decision.decider}" if decision.decider else ""
    if decision.outcome == "approved":
        return f"approved{who}{decision.edits_words}"
    why = decision.comment
    return f"not approved ({decision.outcome}{who}){f': {why}' if why else ''}"


def load_factory(spec: str) -> Callable[..., Any]:
    """`module:function` -> the function (the CLI's --graph).

    The working directory goes first on `sys.path`, as `python -m` puts it: `--graph myapp:build_graph`
    run next to myapp.py imports it (a console script's path holds only its own folder).
    """
    import importlib
    import os
    import sys

    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise SignoffError(f"--graph takes module:function, not {spec!r}")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SignoffError(f"--graph {spec}: cannot import {module_name}: {exc}") from exc
    factory = getattr(module, name, None)
    if not callable(factory):
        raise SignoffError(f"{spec} is not a function in {module_name}")
    return cast("Callable[..., Any]", factory)
