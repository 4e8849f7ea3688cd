"""Start-up checks: each problem is one line naming the setting and what to do, never a traceback.

    bind()           the HTTP port, before anything starts (port in use, bad SIGNOFF_HOST)
    open_database()  reachable (refused, wrong password, missing database, unknown host, SSL refused,
                     SQLite directory missing) and migrated
    check_slack()    auth.test with the bot token; apps.connections.open with the app token (Socket Mode)

A fatal problem raises `StartupError` (the CLI prints its line and exits 2). Slack not answering
(an outage, no network) is not fatal: the caller serves and retries in the background.
"""

from __future__ import annotations

import errno
import os
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from storage.urls import async_url

if TYPE_CHECKING:  # imported where Slack is asked: `signoff db|keys|audit|run` never ask it
    import aiohttp
    from slack_sdk.errors import SlackApiError

    from bot.slack.team import Installation

# Values people leave in from examples (the README's first command uses the first two).
PLACEHOLDERS = ("xoxb-your-bot-token", "your-signing-secret", "xapp-your-app-token", "choose-a-long-random-token")


class StartupError(Exception):
    """A fatal start-up problem; the message is one line saying what to do."""


def is_placeholder(value: str | None) -> bool:
    return bool(value) and (value in PLACEHOLDERS or "your-" in (value or "") or "placeholder" in (value or ""))


# -- the port -------------------------------------------------------------------------------------


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or StartupError saying why not."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        raise StartupError(f"SIGNOFF_HOST={host!r} is not an address of this machine: use 0.0.0.0 (every "
                           "interface) or 127.0.0.1 (this machine only)") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"PORT {port} on {host} is already in use: stop the other server or set PORT to "
                               "a free port") from None
        if exc.errno == errno.EACCES:
            raise StartupError(f"PORT {port}: not allowed to listen there (ports below 1024 need root): set PORT "
                               "to 1024 or above") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise StartupError(f"SIGNOFF_HOST={host!r} is not an address of this machine: use 0.0.0.0 or "
                               "127.0.0.1") from None
        raise StartupError(f"PORT {port} on {host}: cannot listen ({exc.strerror})") from None
    return sock


# -- the database ---------------------------------------------------------------------------------


def sqlite_path(database_url: str) -> Path | None:
    """The SQLite file a URL names (absolute), or None for other engines."""
    url = async_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database:
        return None
    return Path(url.database).expanduser().resolve()


def describe_database(database_url: str) -> str:
    """For the start-up line: `sqlite /abs/path.db` or `postgresql host:port/db` (no password)."""
    path = sqlite_path(database_url)
    if path is not None:
        return f"sqlite {path}"
    url = make_url(database_url.replace("postgres://", "postgresql://", 1))
    return f"postgresql {url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"


def _no_directory(database_url: str) -> None:
    """An SQLite file whose directory is missing: said before any connection is tried."""
    path = sqlite_path(database_url)
    if path is not None and not path.parent.is_dir():
        raise StartupError(f"DATABASE_URL: cannot create the SQLite file {path}: the directory {path.parent} does "
                           "not exist (create it, or point DATABASE_URL at another path)")


def database_problem(exc: BaseException, database_url: str) -> str | None:
    """One line for a failure to reach the database, or None if `exc` is not one we recognise."""
    chain = list(_chain(exc))
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain)
    path = sqlite_path(database_url)
    if path is not None:
        if any(isinstance(e, sqlite3.OperationalError) for e in chain) and "unable to open" in text:
            if not path.parent.is_dir():
                return (f"DATABASE_URL: cannot create the SQLite file {path}: the directory {path.parent} does not "
                        "exist (create it, or point DATABASE_URL at another path)")
            return f"DATABASE_URL: cannot open the SQLite file {path}: check that this user may write there"
        if any(isinstance(e, sqlite3.DatabaseError) for e in chain) and "not a database" in text:
            return f"DATABASE_URL: {path} is not an SQLite database: point DATABASE_URL at Signoff's file"
        return None
    url = make_url(database_url.replace("postgres://", "postgresql://", 1))
    where = f"{url.host or 'localhost'}:{url.port or 5432}"
    if "InvalidPasswordError" in names or "InvalidAuthorizationSpecificationError" in names:
        return (f"DATABASE_URL: PostgreSQL at {where} refused user {url.username!r} (wrong password, or no such "
                "user): fix the user and password in DATABASE_URL")
    if "InvalidCatalogNameError" in names:
        return (f"DATABASE_URL: database {url.database!r} does not exist on {where}: create it "
                f"(createdb {url.database}) or fix the name in DATABASE_URL")
    if any(isinstance(e, socket.gaierror) for e in chain):
        return f"DATABASE_URL: unknown host {url.host!r}: check the host name in DATABASE_URL"
    if "rejected SSL upgrade" in text:
        return (f"DATABASE_URL: PostgreSQL at {where} does not accept SSL, but the URL asks for it (sslmode/ssl="
                "require): drop ?sslmode=require for this server, or enable SSL on it")
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return f"DATABASE_URL: nothing accepts connections at {where}: is PostgreSQL running there, on that port?"
    if any(isinstance(e, TimeoutError) for e in chain):
        return f"DATABASE_URL: no answer from {where}: check the host, the port and any firewall in between"
    if any(isinstance(e, OSError) for e in chain):
        return f"DATABASE_URL: cannot reach {where}: {next(e for e in chain if isinstance(e, OSError))}"
    return None


def _chain(exc: BaseException) -> Any:
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend([getattr(current, "orig", None), current.__cause__, current.__context__])


@dataclass(frozen=True)
class Revisions:
    before: str | None
    after: str | None


async def open_database(database_url: str, *, migrate: bool, must_exist: bool = False) -> Any:
    """The store, reachable and at the latest schema; StartupError with one line otherwise.

    `migrate`: bring the schema up to date (SQLite under `serve`); otherwise an old schema is fatal.
    `must_exist`: an SQLite file that is not there is refused instead of created (`signoff run`).
    """
    from storage.migrate import current_revision, head_revision, upgrade
    from storage.sql import SqlStore
    from storage.stores import open_store

    path = sqlite_path(database_url)
    _no_directory(database_url)
    if must_exist and path is not None and not path.is_file():
        raise StartupError(f"DATABASE_URL: there is no database at {path}; `signoff run` adds the run to the "
                           "database `signoff serve` uses: run it in the server's directory or with the server's "
                           "DATABASE_URL")
    store = None
    try:
        store = await open_store(database_url)
        current = await current_revision(store.engine)
        if migrate and current != head_revision():
            await upgrade(database_url, engine=store.write_engine)
            current = await current_revision(store.engine)
        if current != head_revision():
            await store.close()
            store = None
            raise StartupError(f"DATABASE_URL: the database schema is at {current or 'nothing'} and this version "
                               f"needs {head_revision()}: run `signoff db upgrade` first")
        return store
    except StartupError:
        raise
    except Exception as exc:
        if store is not None:
            await store.close()
        line = database_problem(exc, database_url)
        if line is None:
            raise
        raise StartupError(line) from None


async def upgrade_database(database_url: str) -> Revisions:
    """`signoff db upgrade`: migrate, and say from which revision to which."""
    from storage.migrate import current_revision, upgrade
    from storage.sql import SqlStore
    from storage.stores import open_store

    _no_directory(database_url)
    store = None
    try:
        store = await open_store(database_url)
        before = await current_revision(store.engine)
        await upgrade(database_url, engine=store.write_engine)
        return Revisions(before, await current_revision(store.engine))
    except Exception as exc:
        line = database_problem(exc, database_url)
        if line is None:
            raise
        raise StartupError(line) from None
    finally:
        if store is not None:
            await store.close()


def upgrade_line(revisions: Revisions, where: str) -> str:
    if revisions.before == revisions.after:
        return f"database {where} is already at {revisions.after}; nothing to do"
    if revisions.before is None:
        return f"database {where} created at {revisions.after}"
    return f"database {where} upgraded from {revisions.before} to {revisions.after}"


# -- Slack ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlackCheck:
    """What auth.test said: who the bot is, or (`unreachable`) why Slack could not be asked."""

    team: str | None = None
    bot: str | None = None
    url: str | None = None
    unreachable: str | None = None
    installation: Installation | None = None  # ids: only requests addressed to it are handled (bot/slack/team.py)


async def check_slack(settings: Any, *, session: aiohttp.ClientSession | None = None) -> SlackCheck:
    """auth.test (and apps.connections.open in Socket Mode). A refused token is StartupError naming
    the setting; no answer at all is returned as `unreachable` (not fatal)."""
    import aiohttp
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.slack.team import Installation

    own = session is None
    session = session or aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=settings.http_timeout_seconds))
    try:
        client = AsyncWebClient(token=settings.slack_bot_token, base_url=settings.slack_api_url, session=session,
                                timeout=int(settings.http_timeout_seconds) or 1)
        try:
            identity = await client.auth_test()
        except SlackApiError as exc:
            return _refused(exc, "SLACK_BOT_TOKEN", "auth.test")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            return SlackCheck(unreachable=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        if settings.slack_app_token:
            try:
                await client.apps_connections_open(app_token=settings.slack_app_token)
            except SlackApiError as exc:
                return _refused(exc, "SLACK_APP_TOKEN", "apps.connections.open")
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                return SlackCheck(unreachable=f"{type(exc).__name__}: {exc}")
        return SlackCheck(team=identity.get("team"), bot=identity.get("user"), url=identity.get("url"),
                          installation=Installation.from_auth_test(
                              identity.data if isinstance(identity.data, dict) else {}))
    finally:
        if own:
            await session.close()


def _refused(exc: SlackApiError, setting: str, method: str) -> SlackCheck:
    from bot.slack.failures import permanent_failure

    status = exc.response.status_code
    data = exc.response.data if isinstance(exc.response.data, dict) else {}
    error = str(data.get("error") or f"HTTP {status}")
    if status >= 500:
        return SlackCheck(unreachable=f"{method}: HTTP {status}")
    if status == 429 or error in ("internal_error", "fatal_error", "service_unavailable",
                                                    "request_timeout", "ratelimited"):
        return SlackCheck(unreachable=f"{method}: {error}")
    if setting == "SLACK_APP_TOKEN":
        raise StartupError(f"SLACK_APP_TOKEN: Slack refused it ({error}): create an app-level token with the "
                           "connections:write scope under Basic Information > App-Level Tokens, set SLACK_APP_TOKEN "
                           "to it (xapp-...), or unset SLACK_APP_TOKEN to serve Slack over HTTP")
    failure = permanent_failure(method, error, data)
    fix = failure.fix if failure is not None else "check SLACK_BOT_TOKEN and SLACK_API_URL"
    raise StartupError(f"SLACK_BOT_TOKEN: Slack refused it ({error}): {fix}")


def refuse_ephemeral_sqlite(database_url: str, environ: Any = None) -> None:
    """On a Heroku-style dyno (DYNO set) the disk is wiped on every restart and deploy: an SQLite file
    there loses every request. Refused unless SIGNOFF_ALLOW_EPHEMERAL_SQLITE=1 says it is meant."""
    env = os.environ if environ is None else environ
    if not env.get("DYNO") or sqlite_path(database_url) is None:
        return
    if (env.get("SIGNOFF_ALLOW_EPHEMERAL_SQLITE") or "").strip().lower() in ("1", "true", "yes"):
        return
    raise StartupError("DATABASE_URL is not set (or is SQLite) on a dyno, whose disk is wiped on every restart: "
                       "attach PostgreSQL (heroku addons:create heroku-postgresql) so DATABASE_URL points at it, "
                       "or set SIGNOFF_ALLOW_EPHEMERAL_SQLITE=1 to accept losing everything on restart")
