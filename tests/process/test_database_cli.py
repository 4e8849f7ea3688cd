"""The database as `serve`, `db upgrade` and `run` meet it: unreachable in each of the usual ways is
one line and exit 2 (no traceback); `db upgrade` says what it did; `run` never creates a database the
server would not see, needs no Slack settings, and refuses what the API refuses; a dyno's ephemeral
disk is refused for SQLite unless told otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bot.process.startup import StartupError, open_database
from storage.migrate import head_revision, upgrade
from tests.process.cli import API_TOKEN, BOT_TOKEN, SIGNING_SECRET, assert_one_line, clean_env, signoff
from tests.support.databases import PG_URL
from bench.harness import free_port

HEAD = head_revision()


def _refused_port() -> int:
    return free_port()  # free now, and nothing listens on it


# (DATABASE_URL, the one line). The PostgreSQL server's own refusals need one to refuse them.
CASES: list[tuple[str, str]] = [
    (f"postgresql://signoff:pw@127.0.0.1:{_refused_port()}/signoff",
     "DATABASE_URL: nothing accepts connections at 127.0.0.1:{port}: is PostgreSQL running there, on that port?"),
    ("postgresql://signoff:pw@no-such-host.invalid:5432/signoff",
     "DATABASE_URL: unknown host 'no-such-host.invalid': check the host name in DATABASE_URL"),
    ("sqlite:///{tmp}/no-such-dir/signoff.db",
     "DATABASE_URL: cannot create the SQLite file {tmp}/no-such-dir/signoff.db: the directory {tmp}/no-such-dir "
     "does not exist (create it, or point DATABASE_URL at another path)"),
]
if PG_URL:
    _pg = make_url(PG_URL.replace("postgres://", "postgresql://", 1))
    _where = f"{_pg.host}:{_pg.port or 5432}"
    CASES += [
        (_pg.set(password="certainly-wrong").render_as_string(hide_password=False),
         f"DATABASE_URL: PostgreSQL at {_where} refused user {_pg.username!r} (wrong password, or no such user): fix "
         "the user and password in DATABASE_URL"),
        (_pg.set(database="signoff_no_such_db").render_as_string(hide_password=False),
         f"DATABASE_URL: database 'signoff_no_such_db' does not exist on {_where}: create it (createdb "
         "signoff_no_such_db) or fix the name in DATABASE_URL"),
        (_pg.update_query_dict({"sslmode": "require"}).render_as_string(hide_password=False),
         f"DATABASE_URL: PostgreSQL at {_where} does not accept SSL, but the URL asks for it (sslmode/ssl=require): "
         "drop ?sslmode=require for this server, or enable SSL on it"),
    ]


def _case(url: str, line: str, tmp: Path) -> tuple[str, str]:
    port = str(make_url(url).port) if url.startswith("postgresql") else ""
    return url.format(tmp=tmp), line.format(tmp=tmp.resolve(), port=port)


@pytest.mark.parametrize(("url", "line"), CASES, ids=[line.split(":")[1].strip()[:30] for _, line in CASES])
async def test_unreachable_database_is_one_line(url: str, line: str, tmp_path: Path) -> None:
    url, line = _case(url, line, tmp_path)
    with pytest.raises(StartupError) as raised:
        await open_database(url, migrate=True)
    assert str(raised.value) == line


async def test_serve_db_upgrade_and_run_say_it_in_one_line(tmp_path: Path) -> None:
    url, line = _case(*CASES[0], tmp_path)
    env = clean_env(DATABASE_URL=url, SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
                    SLACK_API_URL="http://127.0.0.1:9/api/", SIGNOFF_API_TOKENS=API_TOKEN, PORT=str(free_port()),
                    SIGNOFF_HOST="127.0.0.1", ANTHROPIC_API_KEY="test-key")
    for args in (["serve"], ["db", "upgrade"], ["run", "tidy up", "--channel", "C1"]):
        assert_one_line(await signoff(*args, env=env, cwd=tmp_path), f"signoff: {line}")


async def test_schema_behind_is_one_line(db_url: str) -> None:
    """PostgreSQL under `serve`, and `run` on any engine: an old schema is refused (SQLite `serve` migrates)."""
    from storage.stores import open_store

    store = await open_store(db_url)
    try:
        async with store.write_engine.begin() as conn:
            await conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0001'")
    finally:
        await store.close()
    with pytest.raises(StartupError) as raised:
        await open_database(db_url, migrate=False)
    assert str(raised.value) == (f"DATABASE_URL: the database schema is at 0001 and this version needs {HEAD}: run "
                                 "`signoff db upgrade` first")


async def test_db_upgrade_says_what_it_did(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    env = clean_env(DATABASE_URL=f"sqlite:///{path}")
    first = await signoff("db", "upgrade", env=env, cwd=tmp_path)
    assert first.code == 0 and first.stdout == f"database sqlite {path.resolve()} created at {HEAD}\n"
    again = await signoff("db", "upgrade", env=env, cwd=tmp_path)
    assert again.stdout == f"database sqlite {path.resolve()} is already at {HEAD}; nothing to do\n"
    older = tmp_path / "older.db"
    await upgrade(f"sqlite:///{older}", "0001")
    done = await signoff("db", "upgrade", env=clean_env(DATABASE_URL=f"sqlite:///{older}"), cwd=tmp_path)
    assert done.stdout == f"database sqlite {older.resolve()} upgraded from 0001 to {HEAD}\n"
    assert first.stderr == again.stderr == done.stderr == ""


async def test_run_needs_the_servers_database_and_no_slack(db_url: str, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(ANTHROPIC_API_KEY="test-key")  # no SLACK_* at all, no DATABASE_URL: ./signoff.db
    done = await signoff("run", "tidy up the release notes", "--channel", "C1", env=env, cwd=elsewhere)
    assert_one_line(done, f"signoff: DATABASE_URL: there is no database at {elsewhere.resolve()}/signoff.db; "
                          "`signoff run` adds the run to the database `signoff serve` uses: run it in the server's "
                          "directory or with the server's DATABASE_URL")
    assert not (elsewhere / "signoff.db").exists()  # nothing created
    ok = await signoff("run", "tidy up the release notes", "--channel", "C1",
                       env={**env, "DATABASE_URL": db_url}, cwd=elsewhere)
    assert ok.code == 0, ok.stderr
    assert ok.stdout.startswith("started run run_") and ok.plain == []


async def test_run_refuses_what_the_api_refuses(db_url: str, tmp_path: Path) -> None:
    env = clean_env(ANTHROPIC_API_KEY="test-key", DATABASE_URL=db_url)
    done = await signoff("run", "tidy up", "--channel", "general", env=env, cwd=tmp_path)
    assert_one_line(done, "signoff: --channel: 'general' is not a Slack channel id (like C0123ABCD)")
    no_key = await signoff("run", "tidy up", "--channel", "C1", env=clean_env(DATABASE_URL=db_url), cwd=tmp_path)
    assert_one_line(no_key, "signoff: ANTHROPIC_API_KEY is not set: the server that works on runs needs it (set it in "
                            "its environment or .env, and here); nothing was started")


@pytest.mark.parametrize("args", [["db", "upgrade"], ["serve"]], ids=["release", "web"])
async def test_procfile_steps_refuse_sqlite_on_a_dyno(args: list[str], tmp_path: Path) -> None:
    env = clean_env(DYNO="web.1", SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
                    SIGNOFF_API_TOKENS=API_TOKEN, PORT=str(free_port()))
    done = await signoff(*args, env=env, cwd=tmp_path)
    assert_one_line(done, "signoff: DATABASE_URL is not set (or is SQLite) on a dyno, whose disk is wiped on every "
                          "restart: attach PostgreSQL (heroku addons:create heroku-postgresql) so DATABASE_URL points "
                          "at it, or set SIGNOFF_ALLOW_EPHEMERAL_SQLITE=1 to accept losing everything on restart")
    assert not (tmp_path / "signoff.db").exists()


async def test_a_dyno_may_be_told_sqlite_is_meant(tmp_path: Path) -> None:
    env = clean_env(DYNO="release.1", SIGNOFF_ALLOW_EPHEMERAL_SQLITE="1")
    done = await signoff("db", "upgrade", env=env, cwd=tmp_path)
    assert done.code == 0 and done.stdout.endswith(f"created at {HEAD}\n")


async def test_version_and_help_name_the_settings(tmp_path: Path) -> None:
    from bot import __version__

    env = clean_env()
    assert (await signoff("--version", env=env, cwd=tmp_path)).stdout == f"signoff {__version__}\n"
    serve = (await signoff("serve", "--help", env=env, cwd=tmp_path)).stdout
    for word in (".env", "PORT", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "DATABASE_URL", "SIGNOFF_API_TOKENS",
                 "--check"):
        assert word in serve
    db = (await signoff("db", "upgrade", "--help", env=env, cwd=tmp_path)).stdout
    assert db.startswith("usage: signoff db upgrade") and "DATABASE_URL" in db and ".env" in db
    run = (await signoff("run", "--help", env=env, cwd=tmp_path)).stdout
    assert "DATABASE_URL" in run and "SIGNOFF_DEFAULT_CHANNEL" in run and "no Slack settings" in run
