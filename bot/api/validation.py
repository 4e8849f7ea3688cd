"""Checking an action's params against its params_schema at a bounded cost, off the event loop when costly.

Invariants:
- Small checks run inline, under a step and time budget (bot/domain/linear.budget): the
  common submit (a few fields, a small schema) pays no process hop. A check that runs out of those
  steps, or whose params are larger than `INLINE_MAX_BYTES`, is redone in a worker process.
- A worker check has a hard time budget: past it the worker is killed (SIGKILL: nothing in it can
  outlast that) and a fresh one started; the caller gets `BudgetSpent`, a 400 naming the budget, and
  nothing is written. The event loop only waits on the worker's pipe meanwhile.
- One token has at most one worker check at a time (another answers 429 with Retry-After), and there
  are `WORKERS` workers: a token cannot occupy all validation capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import multiprocessing
import multiprocessing.connection
from collections.abc import Iterator
from typing import Any

import orjson

from bot.domain.edits import check_schema, params_validator, validate_params
from bot.domain.linear import BudgetExceeded, count_nodes
from bot.errors import InvalidInput, SignoffError

INLINE_STEPS, INLINE_SECONDS = 20_000, 0.01  # keyword applications (a list keyword counts its length), time
INLINE_MAX_BYTES = 16 * 1024  # params larger than this (as JSON) are checked in a worker
INLINE_SCHEMA_NODES = 100  # and schemas larger than this (the meta-schema check costs ~0.3 ms a node)
WORKERS = 2
PER_TOKEN = 1  # worker checks one token may have in flight
SCHEMAS_KEPT = 256  # schemas whose meta-schema verdict is remembered (small ones: inline checks only)


class BudgetSpent(InvalidInput):
    code = "validation_budget_exceeded"


class ValidationBusy(SignoffError):
    code = "too_many_requests"
    status = 429


Answer = tuple[str | None, dict[str, str]]  # (what is wrong with the schema, {field: what is wrong with it})


@functools.lru_cache(maxsize=SCHEMAS_KEPT)
def _compiled(text: bytes) -> tuple[str | None, Any]:
    """(the schema's problem, its validator when it has none)."""
    schema = orjson.loads(text)
    problem = check_schema(schema)
    return problem, None if problem is not None else params_validator(schema)


def _schema_text(schema: dict[str, Any]) -> bytes | None:
    """The schema as JSON in its own key order (the cache's key: a validator reports in that order), or None
    when orjson cannot write it (it is then checked uncached)."""
    try:
        return orjson.dumps(schema)
    except TypeError:
        return None


def _check(schema: dict[str, Any], params: dict[str, Any], steps: int | None = None,
           seconds: float | None = None) -> Answer:
    # Agents send the same few schemas again and again (a Claude Code hook: one per tool), and checking
    # one against the meta-schema costs far more than the params: its verdict and its validator are kept,
    # by its content.
    text = _schema_text(schema)
    if text is None:
        problem, validator = check_schema(schema), None
    else:
        problem, validator = _compiled(text)
    if problem is not None:
        return problem, {}
    return None, validate_params(schema, params, steps=steps, seconds=seconds, schema_checked=True,
                                 validator=validator)


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """A worker's loop: (schema, params) in, `Answer` out."""
    with contextlib.suppress(OSError):
        os.nice(10)  # on a busy machine the server's event loop (acks, /healthz) gets the CPU first
    conn.send_bytes(b"ready")
    while True:
        try:
            schema, params = orjson.loads(conn.recv_bytes())
        except EOFError:
            return
        conn.send_bytes(orjson.dumps(_check(schema, params)))


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Worker:
    def __init__(self) -> None:
        ours, theirs = multiprocessing.get_context("spawn").Pipe()
        self.conn = ours
        self.proc = multiprocessing.get_context("spawn").Process(target=_serve, args=(theirs,), daemon=True,
                                                                   name="signoff-params-check")
        self.proc.start()
        theirs.close()
        # Ready once it has imported what it needs (it is started in a thread: the loop does not wait).
        if not self.conn.poll(60) or self.conn.recv_bytes() != b"ready":
            self.kill()
            raise RuntimeError("the params check worker did not start")

    async def check(self, payload: bytes, seconds: float) -> Answer | None:
        """The worker's answer, or None if it had none within `seconds` (it is then dead)."""
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        fd = self.conn.fileno()
        loop.add_reader(fd, _wake, readable)
        try:
            async with asyncio.timeout(seconds):
                # In a thread: a body larger than the pipe's buffer would block until the worker read it.
                await asyncio.to_thread(self.conn.send_bytes, payload)
                await readable
            problem, errors = orjson.loads(self.conn.recv_bytes())
            return problem, errors
        except (TimeoutError, EOFError, OSError):
            pass
        finally:
            loop.remove_reader(fd)
        await asyncio.to_thread(self.kill)
        return None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(1)
        self.conn.close()

    @property
    def alive(self) -> bool:
        return self.proc.is_alive() and not self.conn.closed


class ParamsChecker:
    def __init__(self, workers: int = WORKERS) -> None:
        self._idle: asyncio.Queue[_Worker | None] = asyncio.Queue()
        for _ in range(workers):
            self._idle.put_nowait(None)  # started when first needed
        self._busy: dict[str, int] = {}
        self.worker_checks = 0  # how many checks went to a worker (tests and benches read it)

    async def check(self, schema: dict[str, Any], params: dict[str, Any], *, who: str, budget_ms: int) -> Answer:
        """`schema`'s problem and `params`' against it; BudgetSpent or ValidationBusy if it costs too much."""
        if len(orjson.dumps(params)) <= INLINE_MAX_BYTES and count_nodes(schema, INLINE_SCHEMA_NODES) <= INLINE_SCHEMA_NODES:
            try:
                return _check(schema, params, INLINE_STEPS, INLINE_SECONDS)
            except BudgetExceeded:
                pass
        if self._busy.get(who, 0) >= PER_TOKEN:
            busy = ValidationBusy(f"this token already has a params_schema check running (at most {PER_TOKEN}); "
                                  "retry once it has been answered")
            busy.retry_after = max(1, math.ceil(budget_ms / 1000))
            raise busy
        self._busy[who] = self._busy.get(who, 0) + 1
        try:
            return await self._in_worker(orjson.dumps([schema, params]), budget_ms)
        finally:
            self._busy[who] -= 1
            if not self._busy[who]:
                del self._busy[who]

    def in_flight(self, who: str) -> int:
        """Worker checks `who` has running or waiting for a worker."""
        return self._busy.get(who, 0)

    async def _in_worker(self, payload: bytes, budget_ms: int) -> Answer:
        worker = await self._idle.get()
        try:
            if worker is None or not worker.alive:
                worker = await asyncio.to_thread(_Worker)  # a spawn takes a moment: not on the loop
            self.worker_checks += 1
            answer = await worker.check(payload, budget_ms / 1000)
            if answer is None:
                worker = None
                raise BudgetSpent(f"params_schema validation exceeded its budget of {budget_ms} ms",
                                  details=[{"field": "action.params_schema",
                                            "message": f"checking params against it exceeded {budget_ms} ms"}])
            return answer
        finally:
            self._idle.put_nowait(worker)

    def close(self) -> None:
        while not self._idle.empty():
            worker = self._idle.get_nowait()
            if worker is not None and worker.alive:
                worker.kill()


def actions_of(body: Any) -> Iterator[tuple[str, Any]]:
    """(field, action) for each action of an ApprovalIn that has a params_schema."""
    if body.action is not None and body.action.params_schema is not None:
        yield "action", body.action
    for i, item in enumerate(body.items or ()):
        if item.params_schema is not None:
            yield f"items.{i}", item


async def check_body(checker: ParamsChecker, body: Any, *, who: str, budget_ms: int) -> None:
    """InvalidInput naming the first action whose params do not match its params_schema."""
    for field, action in actions_of(body):
        problem, errors = await checker.check(action.params_schema, action.params, who=who, budget_ms=budget_ms)
        if problem is not None:
            text = f"is not a valid JSON Schema: {problem}"
            raise InvalidInput(f"invalid request body: {field}.params_schema: {text}",
                               details=[{"field": f"{field}.params_schema", "message": text}])
        if errors:
            name, message = next(iter(errors.items()))
            text = f"params do not match params_schema: {name or 'params'} {message}"
            raise InvalidInput(f"invalid request body: {field}: {text}", details=[{"field": field, "message": text}])
