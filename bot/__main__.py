"""The `signoff` command: wiring only.

    signoff --version
    signoff serve [--check]  run the server (HTTP on $PORT; Socket Mode when SLACK_APP_TOKEN is set);
                             --check runs the start-up checks and exits
    signoff db upgrade       apply database migrations (says from which revision to which)
    signoff run "<task>" --channel C...
                           start an agent run (a running server posts it and does the work)
    signoff policy check FILE
    signoff policy explain --action NAME --params JSON [--requester U..] [--channel C..]
    signoff policy suggest [--days 14]
                           validate the policy file; say what it decides for one call; the rules
                           people's decisions support (allow what they always approve, deny what they reject)
    signoff audit verify     prove the audit log's hash chain (exit 1 at the first altered or missing row)
    signoff audit export [--since 7d] [--format jsonl|csv]
                           stream the audit log (bot/process/audit_cli.py)
    signoff keys [--new]     the public key that signs decisions; --new: a private key for SIGNOFF_SIGNING_KEY
    signoff demo [--port 3000] [--no-agent] [--token T]
                           the bot, an emulated Slack and a page to click in, on this machine; prints the
                           `export SIGNOFF_URL=... SIGNOFF_TOKEN=... SIGNOFF_CHANNEL=...` lines for an agent
    signoff wait | hook | mcp | langgraph | openai | verify
                           agent-side commands (client/signoff/cli.py): wait for a decision, Claude Code hook, MCP
                           server, check a decision's signature offline
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

AGENT_SIDE = ("wait", "hook", "mcp", "langgraph", "openai", "verify")  # handed to client/signoff/cli.py before the server is imported


def _logging(level: str) -> None:
    from bot.process.logs import configure

    configure(level)


_SERVE_HELP = """\
Run the server: HTTP on PORT (default 3000) on SIGNOFF_HOST (default 0.0.0.0) with the agent API,
/healthz, /metrics and (unless Socket Mode) Slack's POST /slack/events.

Reads the environment and a .env file in the working directory:
  SLACK_BOT_TOKEN (required), SLACK_SIGNING_SECRET (required over HTTP), SLACK_APP_TOKEN (Socket Mode),
  SLACK_API_URL, DATABASE_URL (default sqlite:///signoff.db), PORT, SIGNOFF_HOST, SIGNOFF_API_TOKENS,
  SIGNOFF_WEBHOOK_SECRET, SIGNOFF_DEFAULT_CHANNEL, ANTHROPIC_API_KEY, and the other SIGNOFF_* settings
  listed in the README.

Before starting anything it binds the port, reaches and migrates the database (SQLite; PostgreSQL
needs `signoff db upgrade`) and asks Slack who the bot is; a problem is one line and exit code 2.
"""
_DB_HELP = """\
Apply database migrations (the Procfile's release step). Reads DATABASE_URL (default
sqlite:///signoff.db) from the environment or .env; says from which revision to which it went.
"""
_RUN_HELP = """\
Add an agent run to the server's database; a running `signoff serve` posts it in the channel and
works on it. Reads DATABASE_URL (the server's; the database must exist and be migrated),
SIGNOFF_DEFAULT_CHANNEL and ANTHROPIC_API_KEY from the environment or .env; no Slack settings.
"""


_AGENT_SIDE_HELP = """\
agent side (each with its own --help):
  wait ID | --claude-result FILE   wait for a request's decision (exit code: its outcome)
  hook claude-code                 Claude Code's command hook (or the server's HTTP hook: docs/integrations)
  mcp                              Signoff as MCP tools over stdio (request_approval, ask_human, ...)
  langgraph resume                 resume paused LangGraph threads with Signoff's decisions
  openai resume                    resume paused OpenAI Agents SDK runs with Signoff's decisions
  verify RECEIPT                   check a decision's signature offline

The server's commands read settings from the environment and from .env in the working directory; the
agent side reads the environment (SIGNOFF_URL, SIGNOFF_TOKEN, ...) and its options only.
"""


def _parser() -> argparse.ArgumentParser:
    import argparse

    from bot import __version__
    from bot.policy import cli as policy_cli
    from bot.process import audit_cli

    parser = argparse.ArgumentParser(prog="signoff", description="Human approval for AI agents, in Slack.",
                                     epilog=_AGENT_SIDE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"signoff {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server", description=_SERVE_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--check", action="store_true",
                       help="run the start-up checks (port, database, Slack), print what they found and exit")
    db = sub.add_parser("db", help="database tasks", description="Database tasks.")
    db_sub = db.add_subparsers(dest="action", required=True)
    db_sub.add_parser("upgrade", help="apply database migrations", description=_DB_HELP,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    run = sub.add_parser("run", help="start an agent run; the server posts it in Slack and works on it",
                         description=_RUN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("task", help="what the agent should do")
    run.add_argument("--channel", help="the Slack channel id for the run, C... or G... "
                                       "(default: SIGNOFF_DEFAULT_CHANNEL)")
    run.add_argument("--agent", help="which agent (default: demo)")
    policy_cli.add_parser(sub)
    audit_cli.add_parsers(sub)
    demo = sub.add_parser("demo", help="try Signoff without Slack: a local sandbox with a web page")
    demo.add_argument("--port", type=int, default=3000, help="where the page and the bot listen (127.0.0.1)")
    demo.add_argument("--no-agent", action="store_true", help="start quiet: no demo agent run, no sample card")
    demo.add_argument("--token", help="the agent API token to accept (default: one made on first use and kept in "
                                      "$XDG_STATE_HOME/signoff/demo/token, ~/.local/state/signoff/demo/token, "
                                      "so it stays the same across restarts)")
    return parser


def _demo(port: int, *, agent: bool, token: str | None) -> int:
    import asyncio
    import os

    from bot.sandbox.demo import serve
    from bot.sandbox.demo_token import DemoTokenError

    _logging(os.environ.get("SIGNOFF_LOG_LEVEL", "WARNING").upper())
    try:
        asyncio.run(serve(port, os.environ, agent=agent, token=token, say=lambda text: print(text, flush=True)))
    except DemoTokenError as exc:  # raised before anything starts
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # most often: the port is taken
        print(f"signoff: cannot serve the sandbox on 127.0.0.1:{port}: {exc.strerror or exc}; "
              f"try --port {port + 1}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given and given[0] in AGENT_SIDE:
        from signoff.cli import main as agent_main

        return agent_main(given)
    # Start-up builds modules, SQLAlchemy's and Bolt's state: objects that live as long as the process.
    # Collecting while they are made finds nothing to free and took a fifth of `serve`'s start-up
    # (0.3 s of 1.6 s). `serve` turns collection back on once it listens (bot/process/serve.py's _tune_gc,
    # which also freezes what start-up built); every other command, once it has parsed its arguments.
    gc.disable()
    try:
        return _server_side(argv)
    finally:
        gc.enable()


def _server_side(argv: list[str] | None) -> int:
    # Imported here, not in main: the agent-side commands (a Claude Code hook runs once per tool call)
    # must not pay for loading the server's settings and SQLAlchemy (nor asyncio).
    import asyncio

    from bot.policy import cli as policy_cli
    from bot.errors import SignoffError
    from bot.process.settings import RunSettings, Settings, SettingsError, database_url_from_env, log_level_from_env
    from bot.process.startup import StartupError, refuse_ephemeral_sqlite, upgrade_line

    args = _parser().parse_args(argv)
    if args.command != "serve" or args.check:
        gc.enable()
    if args.command == "policy":  # offline: needs no Slack or database settings
        return policy_cli.run(args)
    try:
        if args.command == "demo":
            return _demo(args.port, agent=not args.no_agent, token=args.token)
        if args.command == "db":
            from bot.process.startup import describe_database, upgrade_database

            url = database_url_from_env()
            refuse_ephemeral_sqlite(url)
            _logging(log_level_from_env())
            print(upgrade_line(asyncio.run(upgrade_database(url)), describe_database(url)))
            return 0
        if args.command in ("audit", "keys"):
            from bot.process import audit_cli

            _logging(log_level_from_env())
            return audit_cli.run(args, database_url_from_env())
        if args.command == "run":
            from bot.agent.cli import start_run

            run_settings = RunSettings.from_env()
            _logging(run_settings.log_level)
            run_id = asyncio.run(start_run(run_settings, args.task, channel=args.channel, agent=args.agent))
            print(f"started run {run_id}; a running `signoff serve` posts it in its channel and works on it")
            return 0
        settings = Settings.from_env()
        _logging(settings.log_level)
        refuse_ephemeral_sqlite(settings.database_url)
        from bot.process.serve import announce, check, serve

        announce(settings)
        if args.check:
            for line in asyncio.run(check(settings)):
                print(line)
            return 0
        asyncio.run(serve(settings))
        return 0
    except SignoffError as exc:
        print(f"signoff: {exc.message}", file=sys.stderr)
        return 2
    except (SettingsError, StartupError) as exc:
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
