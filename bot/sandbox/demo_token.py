"""The sandbox's agent API token: chosen with `--token`, or one made once and kept for the next start.

A pasted `export SIGNOFF_TOKEN=...` must keep working when the demo restarts, so the token is not made
up at each start: it is kept in the demo's folder,

    $XDG_STATE_HOME/signoff/demo/token     (default ~/.local/state/signoff/demo/token)

created owner-only (folder 0700, file 0600: other users of the machine cannot read it; a looser file
is tightened when read). Delete the file for a new token. It is an `agent`-scope token of the sandbox
server (bot/api/tokens.py), named `AGENT_NAME`: what any agent's token can do, it can, and no more.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

AGENT_NAME = "sandbox-agent"
TOKEN_FILE = "token"
_SHAPE = re.compile(r"[A-Za-z0-9._~+/=-]{8,200}")
SHAPE_HINT = ("at least 8 (at most 200) letters, digits or - _ . ~ + / = "
              "(no spaces, commas or colons: it goes into SIGNOFF_API_TOKENS)")


class DemoTokenError(Exception):
    """A token that cannot be used, or a token file that cannot be read or written; says the fix."""


def check(token: str, *, source: str = "--token") -> str:
    """The token if it is one the server accepts (and an `export` line keeps as is), else DemoTokenError."""
    if not _SHAPE.fullmatch(token):
        raise DemoTokenError(f"{source} must be {SHAPE_HINT}")
    return token


def folder(environ: Mapping[str, str]) -> Path:
    """Where the demo keeps its token: $XDG_STATE_HOME/signoff/demo, by default ~/.local/state/signoff/demo."""
    state = (environ.get("XDG_STATE_HOME") or "").strip()
    if state and Path(state).is_absolute():  # the XDG spec: a relative value is to be ignored
        return Path(state) / "signoff" / "demo"
    home = (environ.get("HOME") or "").strip()
    return (Path(home) if home else Path.home()) / ".local" / "state" / "signoff" / "demo"


def stable(where: Path) -> str:
    """The token kept in `where` (made, owner-only, on first use); the same one at every start."""
    path = where / TOKEN_FILE
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return _read(path)
        token = secrets.token_urlsafe(24)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(token + "\n")
        return token
    except OSError as exc:
        raise DemoTokenError(f"cannot keep the sandbox's token in {path}: {exc.strerror or exc}; "
                             f"pass --token <value> or set XDG_STATE_HOME to a folder you can write") from None


def _read(path: Path) -> str:
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        os.chmod(path, 0o600)  # readable by others (copied in, or an old umask): owner-only again
    token = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        return check(token, source=f"the token kept in {path}")
    except DemoTokenError as exc:
        raise DemoTokenError(f"{exc}; delete the file for a new token, or pass --token <value>") from None
