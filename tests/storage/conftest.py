"""The storage contract suites' fixtures: each test runs once per backend in `tests/storage/backends.py`.

`store` and `run_store` here shadow the app-wide `store` fixture for the tests in this folder:
the contract speaks to the `Store` / `RunStore` interfaces, never to one implementation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from tests.storage.backends import BACKENDS, Backend, Closer, RunStore, Store

StoreFactory = Callable[[], Awaitable[Store]]
RunStoreFactory = Callable[[], Awaitable[RunStore]]


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    # Synchronous on purpose: a backend may ask for other fixtures (the SQL one for `db_url`).
    return BACKENDS[request.param](request)


@pytest_asyncio.fixture
async def store_factory(backend: Backend) -> AsyncIterator[StoreFactory]:
    """Opens a store on this test's data; every store it opened is closed after the test."""
    opened: list[Store] = []

    async def open_store() -> Store:
        store = await backend.open_store()
        opened.append(store)
        return store

    try:
        yield open_store
    finally:
        for store in reversed(opened):
            await store.close()


@pytest_asyncio.fixture
async def run_store_factory(backend: Backend) -> AsyncIterator[RunStoreFactory]:
    """Opens a run store on this test's data; every one it opened is closed after the test."""
    closers: list[Closer] = []

    async def open_run_store() -> RunStore:
        run_store, close = await backend.open_run_store()
        closers.append(close)
        return run_store

    try:
        yield open_run_store
    finally:
        for close in reversed(closers):
            await close()


@pytest_asyncio.fixture
async def store(store_factory: StoreFactory) -> Store:
    return await store_factory()


@pytest_asyncio.fixture
async def run_store(run_store_factory: RunStoreFactory) -> RunStore:
    return await run_store_factory()
