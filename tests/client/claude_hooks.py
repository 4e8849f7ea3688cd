"""Claude Code's two ways to ask Signoff, behind one interface (`Hook`): the command hook (`signoff hook
claude-code`, beside the agent's files) and the HTTP hook (the docs' snippet, answered by the server)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tests.client.claude_cli import ClaudeCli, hook_settings
from tests.fakes.claude_api import FakeClaudeApi
from tests.support.app import API_TOKEN, App
from tests.support.docs import doc_example

DOCS_SERVER = "http://127.0.0.1:3000"


def http_settings(server: str, query: str = "", *, timeout: int | None = None, event: str = "PreToolUse") -> str:
    """The docs' HTTP hook snippet, pointed at `server`, its URL's options updated with `query` (`&a=1&b=2`)."""
    settings = json.loads(doc_example("claude-http"))
    [entry] = settings["hooks"]["PreToolUse"]
    [hook] = entry["hooks"]
    assert hook["type"] == "http" and hook["onFailure"] == "block" and hook["url"].startswith(DOCS_SERVER)
    url = urlsplit(hook["url"].replace(DOCS_SERVER, server))
    options = {**dict(parse_qsl(url.query)), **dict(parse_qsl(query.lstrip("&")))}
    hook["url"] = urlunsplit(url._replace(query=urlencode(options, safe=",")))
    if timeout is not None:
        hook["timeout"] = timeout
    return json.dumps({"hooks": {event: [entry]}})


@dataclass(frozen=True)
class Hook:
    """One way Claude Code asks: the CLI set up for it, and the settings that install it."""

    kind: str  # "command" or "http"

    @property
    def reads_the_agents_disk(self) -> bool:
        """The command hook runs beside the files (it shows the change against them); the server never reads them."""
        return self.kind == "command"

    def cli(self, app_url: str, model: FakeClaudeApi, tmp_path: Path) -> ClaudeCli:
        if self.kind == "command":
            return ClaudeCli(model, tmp_path, {"SIGNOFF_URL": app_url, "SIGNOFF_TOKEN": API_TOKEN,
                                               "SIGNOFF_CHANNEL": "C1", "SIGNOFF_APPROVERS": "U1,U2"})
        # Only the token: the HTTP hook reads nothing else from the environment (SIGNOFF_URL is not set).
        return ClaudeCli(model, tmp_path, {"SIGNOFF_TOKEN": API_TOKEN})

    def settings(self, app: App, *, wait: str, defer: bool = False) -> str:
        """Asking in C1 of U1 and U2, waiting `wait` seconds for a decision, then denying (or deferring)."""
        if self.kind == "command":
            return hook_settings("--wait", wait, *(("--on-timeout", "defer") if defer else ()))
        return http_settings(app.url, f"&channel=C1&approvers=U1,U2&wait={wait}"
                             + ("&on_timeout=defer" if defer else ""))
