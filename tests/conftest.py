"""Shared fixtures: a real database per test, the fake Slack Web API, and the running app over HTTP.

The engine comes from SIGNOFF_TEST_DATABASE_URL: unset -> SQLite files; a
postgresql:// URL -> a fresh PostgreSQL database per test, cloned from a
template that Alembic migrated once per session (migrations own the schema).
A clone serves the next test once its rows are reset to the template's (`PgClones`, `PgReset`: about
15 ms, where CREATE DATABASE costs 0.2-0.5 s); the rest are made ahead and dropped on threads of the
fixture's own.
"""

from __future__ import annotations

import asyncio
import compileall
import os
import shutil
import sys
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy.engine import make_url

# Keep pytest's assertion-rewritten test modules in their (gitignored) __pycache__ even where
# PYTHONDONTWRITEBYTECODE is set (as on the machines the suite runs on): without it every worker of every
# run parsed and rewrote all ~600 test modules again, about half of each worker's 30 s of collection.
# This file is rewritten before the flag is read; the test modules after it. (The server's own sources:
# _compile_sources below.)
sys.dont_write_bytecode = False

from storage.migrate import upgrade
from storage.sql import SqlStore
from storage.stores import open_store
from bot.sandbox import SlackEmulator
from bot.slack.directory import SlackDirectory
from tests.support.app import App, policy_app, start_app
from tests.support.engines import skip_engine_independent
from tests.support.databases import ENGINE, PG_URL, PgReset, drop_database, pg_admin, pg_url_for
from signoff import signatures


@pytest.fixture(autouse=True)
def _fresh_keyring() -> Iterator[None]:
    """Each test starts with a process that trusts no key yet: a server key pinned by an earlier test
    in the same worker (trust on first use, per process) must not judge another test's decisions."""
    signatures.reset({})
    yield
    signatures.reset({})



def pytest_runtest_setup(item: pytest.Item) -> None:
    if not PG_URL and item.get_closest_marker("postgres_only") is not None:
        pytest.skip("PostgreSQL only: runs when SIGNOFF_TEST_DATABASE_URL names a PostgreSQL database")
    if PG_URL and item.get_closest_marker("sqlite_only") is not None:
        pytest.skip("SQLite only: runs when SIGNOFF_TEST_DATABASE_URL is unset")


# The suite's longest tests (tens of seconds each: servers killed and restarted, benches' smoke runs, real
# agent frameworks' processes), started first so that the two workers (-n 2) end together: with them last in
# collection order one worker ran a minute or two alone at the end. Order only; each test still stands alone.
LONG_FIRST = (
    "tests/process/test_chaos.py", "tests/bench/", "tests/process/test_audit_export.py",
    "tests/slack/test_acked_clicks.py", "tests/slack/test_pg_failover.py", "tests/approvals/test_undo_restart.py",
    "tests/client/test_openai_resume_cli.py", "tests/client/test_langgraph_resume_cli.py",
    "tests/policy/test_bar_property.py", "tests/approvals/test_replicas.py", "tests/client/test_client_pace.py",
    "tests/project/test_client_alone.py", "tests/slack/test_socket_mode_outage.py", "tests/api/test_key_rotation.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))

    def rank(item: pytest.Item) -> int:
        where = Path(str(item.path)).relative_to(root).as_posix()
        return next((i for i, prefix in enumerate(LONG_FIRST) if where.startswith(prefix)), len(LONG_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order
    skip_engine_independent(items, postgres=bool(PG_URL))  # tests/support/engines.py says why


def pytest_report_header(config: pytest.Config) -> str:
    where = make_url(PG_URL).render_as_string(hide_password=True) if PG_URL else "SQLite files"
    return f"signoff test database: {ENGINE} ({where})"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile Signoff's own modules once. Then, in CI, a PostgreSQL run must really reach PostgreSQL:
    stop the whole session at once, loudly, if not."""
    _compile_sources()
    if not (os.environ.get("CI") and PG_URL):
        return
    try:
        asyncio.run(asyncio.wait_for(pg_admin("SELECT 1"), timeout=15))
    except Exception as exc:  # any failure to connect is the message
        where = make_url(PG_URL.replace("postgres://", "postgresql://", 1)).render_as_string(hide_password=True)
        pytest.exit(f"CI is set and SIGNOFF_TEST_DATABASE_URL={where} is unreachable: "
                    f"{type(exc).__name__}: {exc}", returncode=3)


def _compile_sources() -> None:
    """Bytecode for bot/, storage/ and signoff/ (gitignored __pycache__), as an installed wheel has.

    The suite starts `signoff` in subprocesses dozens of times (kill -9, replicas, the CLI; the chaos
    tests alone about 40). With PYTHONDONTWRITEBYTECODE set, as on the machines this was measured on,
    each of them compiled Signoff's sources again: 0.15 s of every start. Nothing is compiled again
    once the files are current."""
    root = Path(__file__).resolve().parent.parent
    for package in ("bot", "storage", "client/signoff"):
        compileall.compile_dir(root / package, quiet=1)


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated database to copy from: a SQLite file, or a PostgreSQL template database."""
    if not PG_URL:
        path = tmp_path_factory.mktemp("template") / "template.db"
        asyncio.run(upgrade(f"sqlite:///{path}"))
        yield str(path)
        return
    name = f"signoff_tpl_{os.getpid()}"
    asyncio.run(pg_admin(f'DROP DATABASE IF EXISTS "{name}"'))
    asyncio.run(pg_admin(f'CREATE DATABASE "{name}"'))
    asyncio.run(upgrade(pg_url_for(name)))
    yield name
    drop_database(name)


class PgClones:
    """Fresh clones of the template for one test each: a used clone put back into the template's state
    (`PgReset`: its rows deleted, about 15 ms), else one made ahead on a thread of its own.

    CREATE DATABASE ... TEMPLATE took 0.2-0.5 s of every PostgreSQL test's set-up (it copies the
    catalogs) and DROP 0.03-0.15 s of its teardown. Made ahead, a clone is ready when its test starts;
    but the copies still cost PostgreSQL about 0.25 s of CPU each, on a machine whose two CPUs the suite
    keeps busy. A used clone is reset on the dropper's thread as soon as its test is over, and the next
    test waits for that (a few ms) rather than for a copy; one that cannot be reset (its shape changed,
    it holds many rows, it has served `MAX_USES` tests) is dropped. Each create, reset and drop opens its
    own connection and event loop.
    """

    MAX_USES = 50

    def __init__(self, template: str, ahead: int = 2) -> None:
        self.template = template
        self._reset = PgReset(template)
        asyncio.run(self._reset.read_template())
        self._creator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-clone-create")
        self._dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-clone-drop")
        self._ready: deque[Future[str]] = deque(self._creator.submit(self._create) for _ in range(ahead))
        self._recycling: deque[Future[str | None]] = deque()
        self._uses: dict[str, int] = {}

    def _create(self) -> str:
        name = f"signoff_t_{uuid.uuid4().hex[:12]}"
        asyncio.run(pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"'))
        return name

    def _recycle(self, name: str) -> str | None:
        uses = self._uses.pop(name, 0) + 1
        try:
            fresh = uses < self.MAX_USES and asyncio.run(self._reset.reset(name))
        except Exception:  # noqa: BLE001 - whatever went wrong, a new clone is the safe answer
            fresh = False
        if fresh:
            self._uses[name] = uses
            return name
        try:
            self._dropper.submit(drop_database, name)  # after this: the next test does not wait for it
        except RuntimeError:  # the session is closing: the dropper takes no more work
            drop_database(name)
        return None

    async def take(self) -> str:
        """A clone in the template's state: the last test's, once reset, or the next one made ahead."""
        while self._recycling:
            name = await asyncio.wrap_future(self._recycling.popleft())
            if name is not None:
                return name
        made = self._ready.popleft()
        self._ready.append(self._creator.submit(self._create))
        return await asyncio.wrap_future(made)

    def done(self, name: str) -> None:
        """The test that had `name` is over: reset it for the next one, or drop it."""
        self._recycling.append(self._dropper.submit(self._recycle, name))

    def close(self) -> None:
        """Drop every clone, and wait until every drop has run."""
        self._creator.shutdown(wait=True)
        for made in self._ready:
            if made.exception() is None:  # a clone that failed to be made has nothing to drop
                self._dropper.submit(drop_database, made.result())
        for recycled in self._recycling:
            self._dropper.submit(_drop_when_reset, recycled)
        self._dropper.shutdown(wait=True)


def _drop_when_reset(recycled: Future[str | None]) -> None:
    name = recycled.result()
    if name is not None:
        drop_database(name)


@pytest.fixture(scope="session")
def pg_clones(template_db: str) -> Iterator[PgClones | None]:
    if not PG_URL:
        yield None
        return
    clones = PgClones(template_db)
    try:
        yield clones
    finally:
        clones.close()


@pytest_asyncio.fixture
async def db_url(template_db: str, pg_clones: PgClones | None, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, fully migrated database for one test."""
    if pg_clones is None:
        path = tmp_path / "signoff.db"
        shutil.copyfile(template_db, path)
        yield f"sqlite:///{path}"
        return
    name = await pg_clones.take()
    try:
        yield pg_url_for(name)
    finally:
        pg_clones.done(name)


@pytest_asyncio.fixture
async def store(db_url: str) -> AsyncIterator[SqlStore]:
    """The storage layer itself, on the test's database."""
    opened = await open_store(db_url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest_asyncio.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    fake = SlackEmulator()
    await fake.start()
    fake.add_channel("C1", "approvals")
    for uid, name in [("U1", "alice"), ("U2", "bob"), ("U3", "carol"), ("UMGR", "manager"), ("UOUT", "mallory")]:
        fake.add_user(uid, name)
    try:
        yield fake
    finally:
        await fake.stop()


@pytest_asyncio.fixture
async def app(request: pytest.FixtureRequest, db_url: str, slack: SlackEmulator) -> AsyncIterator[App]:
    """The running app. A `pytest.mark.settings(token=SECRET, **env)` on the test or its module gives it
    further settings (`env`, e.g. SIGNOFF_EGRESS_ALLOW) and the agent token its client sends."""
    marker = request.node.get_closest_marker("settings")
    env = dict(marker.kwargs) if marker is not None else {}
    token = env.pop("token", None)
    running = await start_app(db_url, slack, **env)
    if token is not None:
        running.headers = {"Authorization": f"Bearer {token}"}
    try:
        yield running
    finally:
        await running.stop()


@pytest_asyncio.fixture
async def papp(request: pytest.FixtureRequest, db_url: str, slack: SlackEmulator, tmp_path: Path) -> AsyncIterator[App]:
    """The app under a policy file, as the test's (or its module's) `policy` marker says:
    `pytest.mark.policy(TEXT, token=SECRET, usergroups={"S1": ["U2"]}, live_directory=True, **env)`.

    `token` is the agent token the app's client sends (the harness's own by default); `usergroups` are
    made in the Slack emulator first; `live_directory` makes every access check ask Slack again (no
    cached directory); `env` are further settings (e.g. SIGNOFF_API_TOKENS)."""
    marker = request.node.get_closest_marker("policy")
    if marker is None:
        raise pytest.UsageError(f"{request.node.nodeid}: the papp fixture needs @pytest.mark.policy(TEXT)")
    [text] = marker.args
    options = dict(marker.kwargs)
    token, live_directory = options.pop("token", None), options.pop("live_directory", False)
    for group, members in options.pop("usergroups", {}).items():
        slack.add_usergroup(group, members)
    async with policy_app(db_url, slack, tmp_path, text, **options) as running:
        if token is not None:
            running.headers = {"Authorization": f"Bearer {token}"}
        if live_directory:
            assert running.signoff is not None
            directory = running.signoff.service.directory
            assert isinstance(directory, SlackDirectory)
            directory.ttl = 0  # every check asks Slack who is in the group
        yield running
