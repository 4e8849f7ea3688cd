"""The `signoff` command: wiring only.

    signoff serve          run the server (HTTP on $PORT; Socket Mode when SLACK_APP_TOKEN is set)
    signoff db upgrade     apply database migrations
    signoff run "<task>" --channel C...
                           start an agent run (a running server posts it and does the work)
    signoff policy check FILE
    signoff policy explain --action NAME --params JSON [--requester U..] [--channel C..]
                           validate the policy file; say what it decides for one call
    signoff demo [--port 3000] [--no-agent]
                           the bot, an emulated Slack and a page to click in, on this machine
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import signal
import sys
from typing import Any

from bot import policy_cli
from bot.errors import SignoffError
from bot.settings import Settings, SettingsError, database_url_from_env


class JsonFormatter(logging.Formatter):
    """One event per line; extra fields such as request_id are kept."""

    _skip = set(vars(logging.makeLogRecord({})))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "at": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in self._skip and not k.startswith("_")})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # Bolt also reads SLACK_BOT_TOKEN itself and warns that the client we hand it wins; it does, by design.
    logging.getLogger("slack_bolt.AsyncApp").addFilter(lambda r: "`token` will be unused" not in r.getMessage())


async def _serve(settings: Settings) -> None:
    from aiohttp import web

    from bot.web import build
    from storage.migrate import current_revision, head_revision, upgrade
    from storage.sql import SqlStore

    store = await SqlStore.open(settings.database_url)
    if settings.is_sqlite:
        await upgrade(settings.database_url, engine=store.write_engine)
    elif await current_revision(store.engine) != head_revision():
        await store.close()
        raise SettingsError("the database schema is not up to date: run `signoff db upgrade` first")
    try:
        signoff = await build(settings, store=store)
    except BaseException:  # e.g. a bad policy file: say only that, not also "unclosed engine"
        await store.close()
        raise
    runner = web.AppRunner(signoff.web_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    # Full (gen-2) GC collections stop the event loop for as long as they take to walk the heap. Keep what
    # was built so far (modules, SQLAlchemy/Bolt/slack_sdk state; it lives as long as the process) out of
    # them, and collect gen 0 less often, so in-flight requests under load die young instead of being
    # promoted into gen 2 and swelling it. bench/core.py, 1000 clicks from 50 clickers: gen-2 pauses
    # 152 ms p50 / 237 ms max and ack p99 ~265 ms as Python ships; 90 / 178 ms and ~200 ms with the
    # freeze; no gen-2 pause in the run and ack p99 ~60-110 ms with both (peak RSS unchanged, ~200 MB).
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
    logging.getLogger("signoff").info(
        "serving", extra={"port": settings.port, "database": store.dialect, "socket_mode": settings.socket_mode}
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if signoff.policy is not None:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGHUP, signoff.policy.reload)  # a bad file keeps the old policy
    await stop.wait()
    await runner.cleanup()


async def _db_upgrade(database_url: str) -> None:
    from storage.migrate import upgrade

    await upgrade(database_url)


def _demo(port: int, *, agent: bool) -> int:
    import os

    from bot.sandbox.demo import serve

    _logging(os.environ.get("SIGNOFF_LOG_LEVEL", "WARNING").upper())
    try:
        asyncio.run(serve(port, os.environ, agent=agent))
    except OSError as exc:  # most often: the port is taken
        print(f"signoff: cannot serve the sandbox on 127.0.0.1:{port}: {exc.strerror or exc}; "
              f"try --port {port + 1}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="signoff", description="Human approval for AI agents, in Slack.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the server")
    db = sub.add_parser("db", help="database tasks")
    db.add_argument("action", choices=["upgrade"])
    run = sub.add_parser("run", help="start an agent run; the server posts it in Slack and works on it")
    run.add_argument("task", help="what the agent should do")
    run.add_argument("--channel", help="the Slack channel id for the run (default: SIGNOFF_DEFAULT_CHANNEL)")
    run.add_argument("--agent", help="which agent (default: demo)")
    policy_cli.add_parser(sub)
    demo = sub.add_parser("demo", help="try Signoff without Slack: a local sandbox with a web page")
    demo.add_argument("--port", type=int, default=3000, help="where the page and the bot listen (127.0.0.1)")
    demo.add_argument("--no-agent", action="store_true", help="start quiet: no demo agent run, no sample card")
    args = parser.parse_args(argv)

    if args.command == "policy":  # offline: needs no Slack or database settings
        return policy_cli.run(args)
    try:
        if args.command == "demo":
            return _demo(args.port, agent=not args.no_agent)
        if args.command == "db":
            asyncio.run(_db_upgrade(database_url_from_env()))
            print("database is up to date")
            return 0
        settings = Settings.from_env()
        _logging(settings.log_level)
        if args.command == "run":
            from bot.agent.cli import start_run

            run_id = asyncio.run(start_run(settings, args.task, channel=args.channel, agent=args.agent))
            print(f"started run {run_id}; a running `signoff serve` posts it in its channel and works on it")
            return 0
        asyncio.run(_serve(settings))
        return 0
    except SignoffError as exc:
        print(f"signoff: {exc.message}", file=sys.stderr)
        return 2
    except SettingsError as exc:
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
