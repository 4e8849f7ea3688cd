"""A unit that holds ONE change (a lone decision): no BEGIN and COMMIT when the change is one statement.

A person's decision on PostgreSQL is one statement (storage/postgres/decide.py); in a unit of its own it
still cost BEGIN and COMMIT, two of its three round trips, each 1-2 ms of wall time on a loaded
machine where the database server shares the CPUs. `PostgresStore.run_change` runs each change in
this unit. Its connection is checked out, and its transaction begun, only at the unit's first
statement, as SQLAlchemy would have done at once; but a write that ends its change (storage.base:
`insert_pending`, `decide_request` with no `then`) and comes FIRST is the whole unit, and runs as a
transaction of its own on the AUTOCOMMIT engine (`sole`), with nothing to begin or commit.

Invariants:
- Atomic as any unit: either every statement of the unit ran inside one transaction (begun before
  the first, committed when the unit ends, rolled back if it raises), or the unit was one statement.
- After `sole`, any further statement is a programming error and raises before anything is sent.
- The unit's after-commit hooks run only once its statement or transaction committed (as `unit()`),
  and before its connection is returned to the pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sqlalchemy.engine import Dialect, Row
from sqlalchemy.exc import NoResultFound
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction

from storage.base import Unit

if TYPE_CHECKING:
    from storage.postgres.raw import RawPool

U = TypeVar("U", bound=Unit)


class Deferred:
    """The connection of a lone unit: what SqlUnit's statements call, checked out at the first one."""

    def __init__(self, begin: AsyncEngine, autocommit: AsyncEngine, stack: AsyncExitStack,
                 raw: RawPool | None = None) -> None:
        self._begin, self._autocommit, self._stack, self._raw = begin, autocommit, stack, raw
        self._conn: AsyncConnection | None = None
        self._tx: AsyncTransaction | None = None
        self.sole_ran = False

    @property
    def dialect(self) -> Dialect:
        return self._begin.dialect

    async def _real(self) -> AsyncConnection:
        if self.sole_ran:
            raise RuntimeError("a statement after the unit's sole statement: its change said it was the last")
        if self._conn is None:
            conn = await self._stack.enter_async_context(self._begin.connect())  # closed: rolled back if open
            self._tx = await conn.begin()
            self._conn = conn
        return self._conn

    async def commit(self) -> None:
        """Commit the transaction, if a statement began one (the sole statement committed by itself)."""
        if self._tx is not None:
            await self._tx.commit()

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        return await (await self._real()).execute(*args, **kwargs)

    async def exec_driver_sql(self, *args: Any, **kwargs: Any) -> Any:
        return await (await self._real()).exec_driver_sql(*args, **kwargs)

    @asynccontextmanager
    async def begin_nested(self) -> AsyncIterator[Any]:
        """A savepoint (storage/sql.py's insert_vote), also as the unit's first statement: the
        connection is checked out and the unit's transaction begun first, as `execute` does."""
        async with (await self._real()).begin_nested() as nested:
            yield nested

    def __getattr__(self, name: str) -> Any:  # sync_connection...: after a first statement
        if self._conn is None:
            raise RuntimeError(f"{name} before the unit's first statement")
        return getattr(self._conn, name)

    async def sole(self, sql: str, params: Sequence[Any]) -> Row[Any]:
        """`sql`'s one row, as the unit's last statement: its own transaction if it is also the first."""
        if self._conn is not None or self.sole_ran:
            return (await (await self._real()).exec_driver_sql(sql, tuple(params))).one()
        self.sole_ran = True
        if self._raw is not None:  # storage/postgres/raw.py; held until the unit ends, as SQLAlchemy's would be
            row = await self._raw.fetchrow(sql, params, lambda: self._sqlalchemy_sole(sql, params), hold=self._stack)
            if row is None:
                raise NoResultFound("No row was found when one was required")
            return cast(Row[Any], row)
        return await self._sqlalchemy_sole(sql, params)

    async def _sqlalchemy_sole(self, sql: str, params: Sequence[Any]) -> Row[Any]:
        conn = await self._stack.enter_async_context(self._autocommit.connect())
        return (await conn.exec_driver_sql(sql, tuple(params))).one()


@asynccontextmanager
async def lone_unit(begin: AsyncEngine, autocommit: AsyncEngine, make: Callable[[AsyncConnection], U],
                    finish: Callable[[Unit], None], raw: RawPool | None = None) -> AsyncIterator[U]:
    """PostgreSQL's lone unit (see the module's note): `make(connection)` on a Deferred connection whose
    transactions are `begin`'s and whose sole statement runs on `autocommit`; `finish(unit)` once committed."""
    async with AsyncExitStack() as stack:
        deferred = Deferred(begin, autocommit, stack, raw)
        unit = make(cast(AsyncConnection, deferred))
        yield unit
        await deferred.commit()
        # Committed: wake the waiters now, before the connection goes back to the pool (awaits in which
        # this process's own NOTIFY could wake them first, without the decided request: a read each).
        finish(unit)
