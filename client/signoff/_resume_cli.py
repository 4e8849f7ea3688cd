"""What the `signoff ... resume` commands share (signoff.langgraph_cli, signoff.openai_cli): the options
that say how they are woken and where Signoff is, `module:name` imported from the working directory, the
webhook receiver `--listen` starts, and the shape of their exit: 2 with one line on stderr when they
cannot start, 0 when stopped.

Standard library only at import: `signoff --help` loads this without any framework or HTTP client.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from signoff.errors import SignoffError

if TYPE_CHECKING:
    from signoff.webhook import WebhookReceiver


def add_waking(resume: argparse.ArgumentParser, paused: str) -> None:
    """--once, --scan-every (between looks for new paused `paused`), --listen and --public-url."""
    resume.add_argument("--once", action="store_true", help="resume what is decided now, then exit")
    resume.add_argument("--scan-every", type=float, default=5.0, help=f"seconds between looks for new paused {paused}")
    resume.add_argument("--listen", metavar="HOST:PORT",
                        help="receive Signoff's decision webhooks here (needs SIGNOFF_WEBHOOK_SECRET) instead of "
                             "long-polling")
    resume.add_argument("--public-url", help="the webhook URL Signoff should call, when not http://HOST:PORT/...")


def add_server(resume: argparse.ArgumentParser, quiet: str) -> None:
    """--url, --token (the Signoff server, default SIGNOFF_URL / SIGNOFF_TOKEN) and --quiet (`quiet` its help)."""
    resume.add_argument("--url", help="the Signoff server (default: SIGNOFF_URL)")
    resume.add_argument("--token", help="API token (default: SIGNOFF_TOKEN)")
    resume.add_argument("--quiet", action="store_true", help=quiet)


def imported(spec: str, option: str, shape: str = "module:name") -> tuple[ModuleType, str]:
    """`module:name` (the value of `--option`) -> (the module, the name in it). The working directory goes
    first on `sys.path`, as `python -m` puts it: `--graph myapp:build_graph` run next to myapp.py imports
    it (a console script's path holds only its own folder)."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise SignoffError(f"--{option} takes {shape}, not {spec!r}")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name), name
    except ImportError as exc:
        raise SignoffError(f"--{option} {spec}: cannot import {module_name}: {exc}") from exc


def webhook_receiver(args: argparse.Namespace) -> WebhookReceiver | None:
    """The receiver `--listen HOST:PORT` asks for, started (None without --listen)."""
    if not args.listen:
        return None
    from signoff.webhook import WebhookReceiver

    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise SignoffError(f"--listen takes HOST:PORT (like 127.0.0.1:8377), not {args.listen!r}")
    secret = os.environ.get("SIGNOFF_WEBHOOK_SECRET", "")
    if not secret:
        raise SignoffError("--listen needs SIGNOFF_WEBHOOK_SECRET (the server's) to check each webhook's signature")
    return WebhookReceiver(secret, host=host, port=int(port), public_url=args.public_url).start()


def reporter(prefix: str, quiet: bool) -> Callable[[str], None] | None:
    """What the command prints per line on stdout (`prefix: line`), None with --quiet."""
    return None if quiet else (lambda line: print(f"{prefix}: {line}", flush=True))


def cannot_start(prefix: str, exc: SignoffError) -> int:
    """Say why on stderr; the exit code of a command that cannot start."""
    print(f"{prefix}: {exc.message}", file=sys.stderr)
    return 2


def until_stopped(go: Callable[[], int], hook: Any) -> int:
    """`go()`'s exit code, 0 on Ctrl-C; the webhook receiver (if any) closed either way."""
    try:
        return go()
    except KeyboardInterrupt:
        return 0
    finally:
        if hook is not None:
            hook.close()
