"""Turn the DATABASE_URL a user (or Heroku) gives into the async SQLAlchemy URL we connect with."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url


class BadDatabaseURL(ValueError):
    pass


_SQLITE_FILES = (".db", ".sqlite", ".sqlite3")


def async_url(raw: str) -> URL:
    """`postgres://`, `postgresql://` -> asyncpg; `sqlite:///file` -> aiosqlite.

    Heroku's `?sslmode=require` is translated to asyncpg's `ssl=require`.
    """
    raw = raw.strip()
    if raw.startswith("postgres://"):
        raw = "postgresql://" + raw[len("postgres://") :]
    try:
        url = make_url(raw)
    except Exception as exc:  # sqlalchemy raises ArgumentError with a long text
        hint = f" (for a SQLite file write sqlite:///{raw})" if "://" not in raw and raw.endswith(_SQLITE_FILES) else (
            " (write sqlite:///path/to/signoff.db or postgresql://user:password@host/db)")
        raise BadDatabaseURL(f"DATABASE_URL is not a database URL: {raw[:40]!r}{hint}") from exc
    backend = url.get_backend_name()
    if backend == "postgresql":
        url = url.set(drivername="postgresql+asyncpg")
        query = dict(url.query)
        if "sslmode" in query:
            query["ssl"] = query.pop("sslmode")
        return url.set(query=query)
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise BadDatabaseURL("DATABASE_URL: SQLite needs a file path (sqlite:///path/to/signoff.db)")
        return url.set(drivername="sqlite+aiosqlite")
    raise BadDatabaseURL(f"DATABASE_URL: unsupported database {backend!r} (use sqlite:/// or postgresql://)")


def sqlite_url_for(path: str | Path) -> str:
    return f"sqlite:///{Path(path)}"
