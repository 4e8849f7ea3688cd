"""PostgreSQL: the hottest statements on asyncpg's own pool, outside SQLAlchemy's async layer.

Every call into a SQLAlchemy `AsyncConnection` runs SQLAlchemy's synchronous core in a greenlet of
its own (on Python 3.11 each new greenlet also maps and unmaps a 16 KB frame stack), and a checkout,
a statement and a check-in are three such calls. Measured in-process on loopback, one `SELECT $1`
through `AsyncEngine.connect()` cost 330-480 µs of CPU; through this pool 170-210 µs. An approval on
PostgreSQL ran about eleven such calls. Eight of them now run here: the request read (every
long-poll, click and card delivery reads its request), a lone unit's sole statement (a submit's
insert, a person's decision: storage/postgres/lone_unit.py), the outbox's claim and its results' one
statement (storage/postgres/outbox.py).

Only statements that run outside any transaction come here (autocommit: one statement is its own
transaction), so SQLAlchemy never tracks a transaction on these connections.

Invariants:
- The connections are the ones SQLAlchemy would open: the dialect's own connect arguments and its
  json/jsonb codecs (`setup_asyncpg_json_codec`), so every value binds and decodes as before
  (tests/storage/test_sqlite_fast.py compares reads, tests/storage/test_decide_rows.py the rows).
- A statement the server refused (`asyncpg.PostgresError`: it wrote nothing, its transaction rolled
  back) runs once more through SQLAlchemy (`again`), which raises what it always raised (the
  IntegrityError of a taken idempotency key, the division that says a read went stale) or, after a
  transient refusal, answers.
- Any other failure (a lost connection: the statement may have committed) never runs again. It is
  raised as SQLAlchemy's `DBAPIError` (with `connection_invalidated`), and both pools drop their
  connections, so after the database drops them at most one call per process fails, as before
  (tests/storage/test_reconnect.py). A disconnect SQLAlchemy sees expires this pool too.
- At most `size` connections; the store gives SQLAlchemy's pool as many fewer (30 per process in all).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bot.domain.json_codec import loads
from storage.postgres import driver as pg_driver

log = logging.getLogger(__name__)

# The connection is gone, or in a state nobody knows (the statement may have committed): never run
# again. A closed connection is asyncpg's InterfaceError (or, when the server's FATAL arrived while
# it was idle, an InternalClientError); class 08 and a server shutting down are PostgresErrors.
# (A value asyncpg cannot encode is a PostgresError of class 22, and an InterfaceError on a live
# connection, such as too many arguments, is `_NotSent`: never sent, so refusals.)
_LOST = (OSError, asyncpg.InterfaceError, asyncpg.exceptions.InternalClientError,
         asyncpg.exceptions.PostgresConnectionError, asyncpg.exceptions.AdminShutdownError,
         asyncpg.exceptions.CrashShutdownError, asyncpg.exceptions.CannotConnectNowError)

SIZE = 10
CHECKOUT_TIMEOUT = 30.0  # SQLAlchemy's pool_timeout
CLOSE_TIMEOUT = 10.0


class _NotSent(Exception):
    """asyncpg refused a statement on a live connection (too many arguments, say): nothing was sent."""


async def _send(conn: Any, method: str, sql: str, params: Sequence[Any]) -> Any:
    try:
        return await getattr(conn, method)(sql, *params)
    except asyncpg.InterfaceError as exc:
        if conn.is_closed():
            raise  # lost
        raise _NotSent(str(exc)) from exc


async def _no_reset(_conn: asyncpg.Connection) -> None:
    """asyncpg resets a released connection with a round trip (RESET ALL, UNLISTEN *, ...); these
    connections run single statements that change no session state, so there is nothing to reset."""


class RawPool:
    """asyncpg's pool, connected as `engine` connects. Open with `await RawPool.open(engine)`."""

    def __init__(self, engine: AsyncEngine, pool: asyncpg.Pool) -> None:
        self._engine = engine
        self._pool = pool
        self._expired = False  # set (synchronously) when SQLAlchemy saw a disconnect
        self.watchers: list[Callable[[str], None]] = []  # each statement's text, before it is sent (tests count them)
        event.listen(engine.sync_engine, "handle_error", self._sqlalchemy_error)

    @classmethod
    async def open(cls, engine: AsyncEngine, size: int = SIZE) -> RawPool:
        pool = await asyncpg.create_pool(min_size=0, max_size=size, init=pg_driver.codecs(engine), reset=_no_reset,
                                         **pg_driver.connect_args(engine))
        return cls(engine, pool)

    def _sqlalchemy_error(self, context: Any) -> None:
        if context.is_disconnect:
            self._expired = True

    async def fetchrow(self, sql: str, params: Sequence[Any], again: Callable[[], Awaitable[Any]], *,
                       hold: AsyncExitStack | None = None) -> Any:
        """`sql`'s first row (or None) on a pooled connection, returned to the pool at once or, with
        `hold`, when that stack closes. Refused (nothing written): `again()`, SQLAlchemy's way."""
        return await self._run("fetchrow", sql, params, again, hold)

    async def fetch(self, sql: str, params: Sequence[Any], again: Callable[[], Awaitable[Any]]) -> Any:
        """`sql`'s rows; refused: `again()`."""
        return await self._run("fetch", sql, params, again, None)

    async def _run(self, method: str, sql: str, params: Sequence[Any], again: Callable[[], Awaitable[Any]],
                   hold: AsyncExitStack | None) -> Any:
        if self._expired:
            self._expired = False
            await self._pool.expire_connections()
        for watch in self.watchers:
            watch(sql)
        try:
            checkout = self._pool.acquire(timeout=CHECKOUT_TIMEOUT)
            if hold is not None:
                conn = await hold.enter_async_context(checkout)
                return await _send(conn, method, sql, params)
            async with checkout as conn:
                return await _send(conn, method, sql, params)
        except TimeoutError as exc:  # no connection within CHECKOUT_TIMEOUT s (SQLAlchemy's pool_timeout)
            raise DBAPIError(sql, tuple(params), exc) from exc
        except _LOST as exc:
            await self._lost()
            raise DBAPIError(sql, tuple(params), exc, connection_invalidated=True) from exc
        except (asyncpg.PostgresError, _NotSent):  # refused: nothing was written
            return await again()

    async def _lost(self) -> None:
        """The connection broke: every pooled one may have (a restarted database). SQLAlchemy's pool
        is replaced as SQLAlchemy replaces it when it meets a disconnect itself."""
        await self._pool.expire_connections()
        await self._engine.dispose()

    async def close(self) -> None:
        if event.contains(self._engine.sync_engine, "handle_error", self._sqlalchemy_error):
            event.remove(self._engine.sync_engine, "handle_error", self._sqlalchemy_error)
        try:
            await asyncio.wait_for(self._pool.close(), CLOSE_TIMEOUT)
        except TimeoutError:
            log.warning("PostgreSQL connections still in use after %.0f s; closing them", CLOSE_TIMEOUT)
            self._pool.terminate()


async def open_engines(url: URL, pool_size: int) -> tuple[AsyncEngine, AsyncEngine, RawPool]:
    """PostgreSQL's engines: (reads outside a transaction, transactions, the raw pool)."""
    # No pool_pre_ping: it cost a round trip per checkout (18 % of the server's busy samples in
    # bench.all's PostgreSQL e2e phase). After a database restart the first statement on a stale
    # connection fails as a disconnect, and SQLAlchemy then discards the whole pool: one failed
    # call per process (an API 500 the agent retries, an outbox attempt retried), not more.
    # The pool holds what the server uses at once: SQLAlchemy closes a connection checked in beyond
    # pool_size, so a pool smaller than the usual concurrency opened and closed connections all day
    # (a PostgreSQL connection costs a backend and an authentication). At most 30 per process with
    # the raw pool's, which carries the reads, submits, decisions and outbox claims.
    engine = create_async_engine(url, pool_size=pool_size, max_overflow=max(0, 30 - SIZE - pool_size),
                                 json_deserializer=loads)
    # Reads run outside a transaction (one pool, two sets of options). Under READ COMMITTED every
    # statement of a transaction takes its own snapshot anyway, so the BEGIN and ROLLBACK around a
    # read only added two round trips to it, and on loopback a round trip's socket write was the
    # largest single cost in the server's profile.
    return engine.execution_options(isolation_level="AUTOCOMMIT"), engine, await RawPool.open(engine)
