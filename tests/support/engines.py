"""Which tests depend on the database engine: the PostgreSQL run of the suite runs those alone.

CI runs the whole suite twice, on SQLite and on PostgreSQL (SIGNOFF_TEST_DATABASE_URL). A test that never
reaches the engine under test (the policy language, Block Kit, the client against a fake, the sandbox on
its own SQLite file, a bench's smoke run on SQLite) does the same work in both runs and can only tell
something new on the second by being flaky. In the PostgreSQL run those are skipped, visibly, with the
reason; `SIGNOFF_TEST_ALL=1` runs them there too.

A test depends on the engine when its module, one of its fixtures (its closure, so fixtures of fixtures
too: `app` needs `db_url`) or a fixture's own source names the engine's ways in (`ENGINE_WORDS`). This
errs toward "depends": a test that opens a SQLite file of its own in a module that also names
`open_store` runs on both, which costs time, never coverage.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

ENGINE_WORDS = re.compile(
    r"\b(db_url|template_db|pg_clones|PG_URL|ENGINE|SIGNOFF_TEST_DATABASE_URL|pg_url\w*|pg_admin|open_store"
    r"|postgres\w*|asyncpg|store\w*)\b", re.IGNORECASE)
RUN_ALL = "SIGNOFF_TEST_ALL"
REASON = ("touches no database: the same test as in the SQLite run, where it ran "
          f"({RUN_ALL}=1 runs it on this run too)")

_named: dict[Any, bool] = {}  # by module path or fixture function: whether its source names the engine


def _names_the_engine(key: Any, read: Callable[[], str]) -> bool:
    """Whether `read()` (a module's or a fixture's source) names the engine; read and searched once per key
    (a module's hundred tests, a fixture every test uses)."""
    if key not in _named:
        try:
            _named[key] = ENGINE_WORDS.search(read()) is not None
        except (OSError, TypeError):
            _named[key] = True  # cannot read it: assume it depends
    return _named[key]


def touches_the_engine(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    info = getattr(item, "_fixtureinfo", None)
    if module is None or info is None:  # not a plain Python test function: run it
        return True
    path = Path(str(module.__file__))
    if _names_the_engine(path, path.read_text):
        return True
    for name in info.names_closure:
        if ENGINE_WORDS.search(name):
            return True
        for definition in info.name2fixturedefs.get(name, ()):
            if _names_the_engine(definition.func, partial(inspect.getsource, definition.func)):
                return True
    return False


def run_all() -> bool:
    """SIGNOFF_TEST_ALL is set: the PostgreSQL run runs what the SQLite run covers too."""
    return os.environ.get(RUN_ALL, "").strip() not in ("", "0")


def skip_engine_independent(items: list[pytest.Item], *, postgres: bool) -> int:
    """On the PostgreSQL run (unless SIGNOFF_TEST_ALL is set): a visible skip on each test that does not
    depend on the engine. How many were marked."""
    if not postgres or run_all():
        return 0
    marked = 0
    for item in items:
        if item.get_closest_marker("postgres_only") is None and not touches_the_engine(item):
            item.add_marker(pytest.mark.skip(reason=REASON))
            marked += 1
    return marked
