"""`signoff demo`: the bot, the Slack emulator and the sandbox page in one process, on SQLite.

Everything lives on one port (default 3000, loopback only; `Host` must be a loopback name and a browser's
write must come from the page itself: bot/sandbox/local_only.py):

    /                     the page: be an approver, a manager or an outsider and click
    /slack/events         the bot, as in production; the page signs what it sends like Slack
    /api/v1/...           the agent API (its token is printed at start)
    /sandbox/slack/api/   the emulated Slack Web API (the bot's SLACK_API_URL)

The database is a fresh SQLite file in a new temporary folder each start, removed at stop (the
emulator's messages live in memory, so a kept database would point at cards that no longer exist). The
agent API token is the one exception: `--token`, or one kept in the demo's folder (bot/sandbox/demo_token.py),
so the `export SIGNOFF_TOKEN=...` line it prints keeps working after a restart. Slack's tokens and secrets
are made up at start; nothing is configured and nothing leaves the machine, except model calls when
ANTHROPIC_API_KEY is set (then the demo agent is Claude instead of the scripted model).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bot.sandbox import demo_token
from bot.sandbox.demo_model import NOTES_BEFORE, NOTES_PATH, TASK, demo_reply
from bot.sandbox.local_only import local_only
from bot.sandbox.model import FakeAnthropic
from bot.sandbox.page.actions import PageActions
from bot.sandbox.page.routes import Connect, SandboxPage
from bot.sandbox.server import SlackEmulator
from bot.sandbox.signed import SlackClient

CHANNEL = "CAPPROVALS"
APPROVER, MANAGER, OUTSIDER = "UALICE", "UMORGAN", "UOSCAR"
PEOPLE = [  # (id, name, real name, role)
    (APPROVER, "alice", "Alice Approver", "approver"),
    (MANAGER, "morgan", "Morgan Manager", "manager"),
    (OUTSIDER, "oscar", "Oscar Outsider", "outsider"),
]


@dataclass
class Demo:
    """A running sandbox: where it listens, the agent API token (and where it is kept), and how to stop it."""

    url: str
    api_token: str
    database: Path
    scripted_model: bool
    runner: web.AppRunner
    model: FakeAnthropic | None
    client: SlackClient
    token_file: Path | None = None  # None: chosen with --token, kept nowhere
    policy: Path | None = None  # the policy file loaded
    own_policy: bool = False  # SIGNOFF_POLICY's (else the sandbox's DEMO_POLICY, written at start)
    agent: bool = True  # the demo agent started (not --no-agent)
    webhooks: str = ""  # SIGNOFF_EGRESS_ALLOW when SIGNOFF_WEBHOOK_SECRET is set too ("": webhooks are refused)

    async def stop(self) -> None:
        await self.client.close()
        await self.runner.cleanup()
        if self.model is not None:
            await self.model.stop()
        shutil.rmtree(self.database.parent, ignore_errors=True)  # the sandbox keeps nothing


# Without SIGNOFF_POLICY the sandbox loads this, so a call that only reads is allowed with no card (what
# a policy is for) while everything else asks. Only the Claude Code tools named here: the demo agent's own
# tools, and the requests the banner's example sends, ask as they would with no policy.
DEMO_POLICY = r"""# signoff demo's policy (docs/policy.md). Set SIGNOFF_POLICY to a file of your own to try another.
default_tier: high
rules:
  - name: read-only-shell
    tool: Bash
    params:
      # One command that only reads, with plain arguments: letters, digits and - _ . / @ : , = + only
      # (no quotes, globs, braces, ; & | $ ` < > or newline, so nothing else rides along), and no word
      # dev, proc or sys (/dev/zero never ends). No git: its options and config can write files and run code.
      command: {regex: '^(?!.*\b(dev|proc|sys)\b)(ls|pwd|cat|head|wc|echo)( [-\w./@:,=+]+)*\Z'}
    effect: allow
    tier: low
  - name: reading-files
    tool: [Read, Glob, Grep]
    effect: allow
    tier: low
"""


def workspace() -> SlackEmulator:
    """The emulated workspace: three people and #approvals, where cards appear."""
    slack = SlackEmulator(bot_token="xoxb-sandbox-" + secrets.token_hex(12))
    for uid, name, real, _role in PEOPLE:
        slack.add_user(uid, name, real)
    slack.add_channel(CHANNEL, "approvals", [uid for uid, *_ in PEOPLE])
    slack.add_usergroup("SMANAGERS", [MANAGER], handle="managers")
    return slack


def exports(url: str, token: str) -> list[str]:
    """The lines an engineer pastes into a shell so every agent-side example talks to this sandbox."""
    return [f"export SIGNOFF_URL={url}", f"export SIGNOFF_TOKEN={token}", f"export SIGNOFF_CHANNEL={CHANNEL}"]


def demo_env(environ: Mapping[str, str], *, port: int, workdir: Path, slack: SlackEmulator,
             signing_secret: str, api_token: str, model_url: str | None) -> dict[str, str]:
    """The bot's settings: Slack, database and tokens are the sandbox's; other SIGNOFF_* settings pass."""
    env = {k: v for k, v in environ.items() if k.startswith("SIGNOFF_") or k.startswith("ANTHROPIC_")}
    env.setdefault("SIGNOFF_LOG_LEVEL", "WARNING")
    env.update({
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": signing_secret,
        "SLACK_API_URL": f"http://127.0.0.1:{port}/sandbox/slack/api/",
        "DATABASE_URL": f"sqlite:///{workdir / 'signoff.db'}",
        "SIGNOFF_API_TOKENS": f"{demo_token.AGENT_NAME}:{api_token}:agent",  # an agent's token, as any agent has
        "SIGNOFF_DEFAULT_CHANNEL": CHANNEL,
        "SIGNOFF_CLAUDE_TRANSCRIPTS": "read",  # the demo runs beside the agent: HTTP hooks may defer
        "SIGNOFF_WORKSPACE": str(workdir / "workspace"),
        "SIGNOFF_EMAIL_OUTBOX": str(workdir / "outbox"),
        "SIGNOFF_HOST": "127.0.0.1",
        "PORT": str(port),
    })
    if model_url is not None:
        env.update({"ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": "sandbox-scripted-model",
                    "SIGNOFF_MODEL": "sandbox-scripted"})
    return env


async def start_demo(port: int, environ: Mapping[str, str], *, agent: bool = True, token: str | None = None) -> Demo:
    """Start the sandbox on 127.0.0.1:`port`; the agent API token is `token`, or the one kept in the
    demo's folder (made on first use). DemoTokenError names a token or token file that cannot be used."""
    from bot.process.settings import Settings
    from bot.process.app import build
    from bot.process.startup import open_database

    token_file = None
    if token is None:
        where = demo_token.folder(environ)
        token, token_file = demo_token.stable(where), where / demo_token.TOKEN_FILE
    api_token = demo_token.check(token)
    async with contextlib.AsyncExitStack() as undo:  # a start that fails leaves nothing open behind it
        sock = _listen(port)  # first, so a taken port is said before anything is made
        undo.callback(sock.close)
        workdir = Path(tempfile.mkdtemp(prefix="signoff-demo-"))
        undo.callback(shutil.rmtree, workdir, ignore_errors=True)
        (workdir / "workspace").mkdir()
        (workdir / "workspace" / NOTES_PATH).write_text(NOTES_BEFORE, encoding="utf-8")
        slack = workspace()
        signing_secret = secrets.token_hex(16)
        model: FakeAnthropic | None = None
        if not environ.get("ANTHROPIC_API_KEY"):
            model = FakeAnthropic()
            model.on_request(demo_reply)
            await model.start()
            undo.push_async_callback(model.stop)
        env = demo_env(environ, port=port, workdir=workdir, slack=slack, signing_secret=signing_secret,
                       api_token=api_token, model_url=model.url if model else None)
        own_policy = bool(env.get("SIGNOFF_POLICY"))
        if not own_policy:
            (workdir / "policy.yaml").write_text(DEMO_POLICY, encoding="utf-8")
            env["SIGNOFF_POLICY"] = str(workdir / "policy.yaml")
        settings = Settings.from_env(env, dotenv=None)
        store = await open_database(settings.database_url, migrate=True)  # made and migrated
        undo.push_async_callback(store.close)
        signoff = await build(settings, store=store)
        signoff.web_app.middlewares.insert(0, local_only)  # loopback Host only, no cross-site writes
        url = f"http://127.0.0.1:{port}"
        slack.attach(signoff.web_app, url)
        client = SlackClient(url, signing_secret, fake=slack)
        undo.push_async_callback(client.close)
        labels = [(uid, f"{real} ({role})") for uid, _n, real, role in PEOPLE]
        connect = Connect(exports(url, api_token), CHANNEL, [(uid, name, role) for uid, name, _r, role in PEOPLE])
        SandboxPage(slack, PageActions(slack, client), labels, CHANNEL, connect).add_routes(signoff.web_app)
        runner = web.AppRunner(signoff.web_app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()  # starts the bot; its cleanup stops it and closes its sessions and the store
        undo.push_async_callback(runner.cleanup)
        await web.SockSite(runner, sock).start()
        demo = Demo(url, api_token, workdir / "signoff.db", model is not None, runner, model, client, token_file,
                    Path(env["SIGNOFF_POLICY"]), own_policy, agent,
                    (",".join(settings.egress_allow) or "-") if settings.webhook_secret else "")  # as the server reads them
        if agent:
            await seed(demo)
        undo.pop_all()  # started: Demo.stop() undoes it from now on
    return demo


def _listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port`; OSError (EADDRINUSE: the port is taken) before anything starts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def seed(demo: Demo) -> None:
    """Something to click at once: the demo agent's run, and one request as any agent would send it."""
    headers = {"Authorization": f"Bearer {demo.api_token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(demo.url + "/api/v1/runs", json={"task": TASK, "channel": CHANNEL}) as resp:
            resp.raise_for_status()
        async with http.post(demo.url + "/api/v1/approvals", json=sample_request()) as resp:
            resp.raise_for_status()


def sample_request(**overrides: Any) -> dict[str, Any]:
    """An approval only Alice may give, with reminders and an escalation to Morgan."""
    body: dict[str, Any] = {
        "action": {"name": "refund", "params": {"order": "A-1042", "amount": 40, "currency": "USD"}},
        "summary": "Refund order A-1042 ($40)",
        "context": "The customer asked twice; refunds under $100 are routine.",
        "preview": {"kind": "table", "columns": ["order", "amount", "reason"], "rows": [["A-1042", "$40", "late"]]},
        "risk": "high",
        "channel": CHANNEL,
        "approvers": [APPROVER],
        "requested_by": "support-agent",
        "reminders": {"every": "10m", "max": 3},
        "escalation": {"levels": [{"after": "30m", "notify": [MANAGER]}]},
    }
    body.update(overrides)
    return body


def banner(demo: Demo) -> str:
    people = ", ".join(f"{real} ({role}, {uid})" for uid, _n, real, role in PEOPLE)
    model = "the scripted demo model (set ANTHROPIC_API_KEY to use Claude)" if demo.scripted_model else "Claude"
    kept = (f"kept in {demo.token_file}, the same at every start" if demo.token_file is not None
            else "chosen with --token")
    return "\n".join([
        f"Signoff sandbox: open {demo.url}/",
        f"  Slack:     emulated in this process, no workspace needed; be {people}",
        f"  Channel:   #approvals, id {CHANNEL}: cards appear there",
        f"  Database:  SQLite at {demo.database} (a new temporary file each start, removed at stop)",
        f"  Agent:     the demo agent on {model}" if demo.agent else "  Agent:     none (--no-agent)",
        f"  Agent API: {demo.url}/api/v1/approvals and the rest of docs/api.md; bearer token {demo.api_token} ({kept})",
        f"  Policy:    {demo.policy}" + ("" if demo.own_policy else
                                         " (the sandbox's: read-only shell commands and file reads pass with no card,"
                                         " everything else asks; set SIGNOFF_POLICY to use your own)"),
        _webhooks_line(demo.webhooks),
        "# to try an integration, paste:",
        *exports(demo.url, demo.api_token),
        "# then, for example:",
        "curl -s -X POST \"$SIGNOFF_URL/api/v1/approvals\" -H \"Authorization: Bearer $SIGNOFF_TOKEN\" \\",
        "  -H 'Content-Type: application/json' -d '{\"action\": {\"name\": \"deploy\", \"params\": {}}, "
        f"\"summary\": \"Deploy to production\", \"channel\": \"{CHANNEL}\", \"approvers\": [\"{APPROVER}\"]}}'",
        "Stop with Ctrl-C.",
    ])


def _webhooks_line(allowed: str) -> str:
    """Whether a request's callback_url is accepted, and where it may point (the pages with webhooks need it)."""
    if not allowed:
        return ("  Webhooks:  off (a callback_url is refused); to try them, start with "
                "SIGNOFF_WEBHOOK_SECRET=change-me SIGNOFF_EGRESS_ALLOW=127.0.0.1")
    if allowed == "-":
        return ("  Webhooks:  signed with SIGNOFF_WEBHOOK_SECRET; public addresses only "
                "(SIGNOFF_EGRESS_ALLOW=127.0.0.1 for this machine)")
    return f"  Webhooks:  signed with SIGNOFF_WEBHOOK_SECRET; also to {allowed} (SIGNOFF_EGRESS_ALLOW)"


async def serve(port: int, environ: Mapping[str, str], *, agent: bool, token: str | None = None,
                say: Callable[[str], Any] = print) -> None:
    demo = await start_demo(port, environ, agent=agent, token=token)
    say(banner(demo))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await demo.stop()
