"""`signoff serve`: check, bind, build, serve, drain.

Order matters: settings are parsed, the port is bound (nothing else has started, so a port in use is
one line and no half-started scheduler or HTTP session is left behind), the database is reached and
migrated, Slack is asked who we are; only then are background jobs started. A fatal problem raises
`StartupError` (one line); Slack not answering is a WARNING and a retry in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Callable
from typing import Any

from bot.process.settings import Settings
from bot.process.startup import (
    PLACEHOLDERS,
    SlackCheck,
    StartupError,
    bind,
    check_slack,
    describe_database,
    is_placeholder,
    open_database,
)

log = logging.getLogger("signoff")

SLACK_RETRY_MAX_SECONDS = 300.0


def announce(settings: Settings) -> None:
    """Start-up notes that are not fatal: placeholders, a closed agent API, unknown settings."""
    placeholders = [name for name, value in (("SLACK_BOT_TOKEN", settings.slack_bot_token),
                                             ("SLACK_SIGNING_SECRET", settings.slack_signing_secret),
                                             ("SLACK_APP_TOKEN", settings.slack_app_token))
                    if is_placeholder(value)]
    if placeholders:
        log.warning("%s still hold placeholder values: nothing will reach Slack until you set your app's "
                    "credentials (README, 'Create the Slack app')", " and ".join(placeholders))
    if any(token in PLACEHOLDERS for token in settings.api_tokens):
        log.warning("SIGNOFF_API_TOKENS holds the README's example token: anyone who read the README can call "
                    "the agent API; choose a long random token of your own")
    if not settings.api_tokens:
        log.warning("the agent API is closed: SIGNOFF_API_TOKENS is not set, so every /api/v1 call is refused "
                    "with 401; set it to one or more comma-separated tokens of 8+ characters to open it")
    for line in settings.unknown_settings_lines():
        log.warning(line)


async def preflight(settings: Settings) -> tuple[Any, Any, SlackCheck]:
    """(bound socket, store, what Slack said). Raises StartupError with one line."""
    sock = bind(settings.host, settings.port)
    try:
        store = await open_database(settings.database_url, migrate=settings.is_sqlite)
    except BaseException:
        sock.close()
        raise
    try:
        slack = await ask_slack(settings)
    except BaseException:
        sock.close()
        await store.close()
        raise
    return sock, store, slack


async def ask_slack(settings: Settings) -> SlackCheck:
    """auth.test with the bot token (a placeholder is never sent): who we are, or why Slack was not asked."""
    if is_placeholder(settings.slack_bot_token):
        return SlackCheck(unreachable="SLACK_BOT_TOKEN is a placeholder")
    return await check_slack(settings)


def learn_slack(signoff: Any, slack: SlackCheck) -> None:
    """Keep what auth.test said: the health page's identity, and the workspace Slack requests must name
    (else the first Slack request waits for auth.test, up to 2 s, and is refused if it does not come)."""
    if not slack.unreachable:
        signoff.slack_health.identity = {"team": slack.team or "", "bot": slack.bot or ""}
        signoff.slack_health.ok()
    if slack.installation is not None and signoff.team is not None:
        signoff.team.learned(slack.installation)


def slack_line(settings: Settings, slack: SlackCheck) -> str:
    mode = "Socket Mode" if settings.socket_mode else "HTTP (Slack sends to /slack/events)"
    if slack.unreachable:
        return f"Slack: {mode}, not checked yet"
    return f"Slack: {mode}, workspace {slack.team!r} as @{slack.bot}"


async def check(settings: Settings) -> list[str]:
    """`signoff serve --check`: run every start-up check, start nothing; the lines to print."""
    sock, store, slack = await preflight(settings)
    sock.close()
    await store.close()
    lines = [f"ok: PORT {settings.port} on {settings.host} is free",
             f"ok: database {describe_database(settings.database_url)} is reachable and up to date"]
    if slack.unreachable:
        lines.append(f"warning: Slack could not be checked ({slack.unreachable}); `serve` would start and retry")
    else:
        lines.append(f"ok: {slack_line(settings, slack)}")
    return lines


def app_runner(app: Any, settings: Settings) -> Any:
    """The aiohttp runner that serves `app`, with the connection timeouts an untrusted client needs.

    aiohttp's `keepalive_timeout` runs from a connection's start (and from each response's end) until a
    request's headers have all arrived, and never while a handler runs (a long-poll is not cut): so a
    client that opens a connection, or sends half a request line or headers and then stalls, is closed
    after `header_timeout_seconds` (aiohttp's own default is an hour).
    """
    from aiohttp import web

    return web.AppRunner(app, access_log=None, keepalive_timeout=settings.header_timeout_seconds)


async def serve(settings: Settings) -> None:
    from aiohttp import web

    from bot.process.app import build

    sock, store, slack = await preflight(settings)
    try:
        signoff = await build(settings, store=store)
    except BaseException:  # e.g. a bad policy file: say only that, not also "unclosed engine"
        sock.close()
        await store.close()
        raise
    learn_slack(signoff, slack)
    runner = app_runner(signoff.web_app, settings)
    await runner.setup()  # starts the background jobs
    await web.SockSite(runner, sock).start()
    _tune_gc()
    collecting = asyncio.create_task(_full_collections(lambda: signoff.backlog.last_arrival), name="signoff-gc")
    host = "localhost" if settings.host in ("0.0.0.0", "::", "") else settings.host
    log.info("serving on http://%s:%d (database: %s; %s)", host, settings.port,
             describe_database(settings.database_url), slack_line(settings, slack),
             extra={"port": settings.port, "database": store.dialect, "socket_mode": settings.socket_mode})
    retry = None
    if slack.unreachable and not is_placeholder(settings.slack_bot_token):
        log.warning("Slack did not answer auth.test (%s): serving anyway; cards wait in the outbox and go out "
                    "once Slack answers", slack.unreachable)
        retry = asyncio.create_task(_retry_slack(settings, signoff), name="signoff-slack-check")
    stop = asyncio.Event()
    received: list[str] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, on_signal, sig)
    if signoff.policy is not None:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGHUP, signoff.policy.reload)  # a bad file keeps the old policy
    await stop.wait()
    log.info("%s: stopping; finishing %s", received[0] if received else "stop", _draining(signoff))
    collecting.cancel()
    if retry is not None:
        retry.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await retry
    with contextlib.suppress(asyncio.CancelledError):
        await collecting
    await runner.cleanup()
    log.info("stopped")


def _draining(signoff: Any) -> str:
    """What a graceful stop waits for, in words."""
    parts = [f"{len(signoff.background)} acked Slack request(s) or note(s) still being handled",
             f"{signoff.backlog.queued} click(s) in the backlog",
             f"{signoff.dispatcher.in_flight} outbox deliver(ies) in flight (interrupted ones are retried by "
             "the next process)"]
    return ", ".join(parts)


async def _retry_slack(settings: Settings, signoff: Any) -> None:
    """auth.test again with backoff until Slack answers; one INFO when it does, one ERROR if it refuses."""
    delay = 1.0
    while True:
        await asyncio.sleep(delay)
        try:
            slack = await check_slack(settings)
        except StartupError as exc:
            log.error("%s", exc)
            return
        if not slack.unreachable:
            learn_slack(signoff, slack)
            log.info("Slack answers: workspace %r as @%s", slack.team, slack.bot)
            return
        delay = min(delay * 2, SLACK_RETRY_MAX_SECONDS)


GC_EVERY_SECONDS = 60.0
GC_QUIET_SECONDS = 0.5


async def _full_collections(last_arrival: Callable[[], float], every: float = GC_EVERY_SECONDS,
                            quiet: float = GC_QUIET_SECONDS) -> None:
    """A full collection about once a minute, at a moment no Slack request has come for `quiet` seconds
    (or after waiting `every` more seconds for one).

    With gen 0's threshold at 50,000 (`_tune_gc`) and most of each request's objects freed by their
    reference counts, gen 0 fills slowly, and a full collection came once every hundred of those: hours
    apart at a few requests a second. Reference cycles that outlived a gen-0 collection (an in-flight
    request's state caught by one) waited that long, and the heap grew meanwhile (bench.soak, PostgreSQL,
    4 requests/s, minutes 7 to 16: A's RSS 146.1 -> 149.0 MiB without these, 115.4 -> 115.7 with them;
    docs/benchmarks.md). Start-up's objects are frozen, so a full collection walks only what was made
    since (about 63,000 objects in that replica)."""
    while True:
        await asyncio.sleep(every)
        deadline = time.monotonic() + every  # the clock `last_arrival` reads (bot/slack/backlog.py)
        while time.monotonic() - last_arrival() < quiet and time.monotonic() < deadline:
            await asyncio.sleep(quiet)
        gc.collect()


def _tune_gc() -> None:
    # Full (gen-2) GC collections stop the event loop for as long as they take to walk the heap. Keep what
    # was built so far (modules, SQLAlchemy/Bolt/slack_sdk state; it lives as long as the process) out of
    # them, and collect gen 0 less often, so in-flight requests under load die young instead of being
    # promoted into gen 2 and swelling it. bench/core.py, 1000 clicks from 50 clickers: gen-2 pauses
    # 152 ms p50 / 237 ms max and ack p99 ~265 ms as Python ships; 90 / 178 ms and ~200 ms with the
    # freeze; no gen-2 pause in the run and ack p99 ~60-110 ms with both (peak RSS unchanged, ~200 MB).
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
    gc.enable()  # `signoff serve` starts with it off (bot/__main__.py)
