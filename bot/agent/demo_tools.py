"""The demo toolset: a workspace folder, an email outbox folder, and the web.

    list_files, read_file   low risk, read-only: run without asking (audited)
    fetch_url               high: a person approves the URL (it may reach what the server can); the
                            egress guard refuses non-public addresses and checks every redirect
    write_file              high: a person approves, looking at the diff it will make
    send_email              high: a person approves, looking at the email (written as .eml)
    call_webhook            high: a person approves the JSON it will POST; never re-run blindly
    delete_file             critical: a person approves, looking at what will be lost
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path
from typing import Annotated, Any

from bot.agent.tools import EMAIL, URI, ToolContext, ToolError, Toolset
from bot.domain.formats import is_email
from bot.domain.model import Preview, Risk
from bot.outbox.egress import MAX_REDIRECTS, EgressRefused, guarded_session, request

MAX_READ_BYTES = 200_000
MAX_LIST = 500
SENDER = "agent@signoff.local"


def inside(ctx: ToolContext, path: str) -> Path:
    """`path` resolved inside the workspace; anything that escapes it is refused."""
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    root = ctx.workspace.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"{path!r} is outside the workspace")
    return target


def _read_text(target: Path) -> str:
    data = target.read_bytes()[:MAX_READ_BYTES]
    return data.decode("utf-8", errors="replace")


def _current(ctx: ToolContext, path: str) -> str:
    try:
        target = inside(ctx, path)
    except ToolError:
        return ""
    return _read_text(target) if target.is_file() else ""


def _write_preview(ctx: ToolContext, params: dict[str, Any]) -> Preview:
    path = str(params.get("path", ""))
    return Preview("diff", {"path": path, "before": _current(ctx, path), "after": str(params.get("content", ""))})


def _delete_preview(ctx: ToolContext, params: dict[str, Any]) -> Preview:
    path = str(params.get("path", ""))
    return Preview("diff", {"path": path, "before": _current(ctx, path), "after": ""})


def _email_preview(ctx: ToolContext, params: dict[str, Any]) -> Preview:
    return Preview("email", {
        "to": _addresses(params.get("to")), "cc": _addresses(params.get("cc")),
        "subject": str(params.get("subject", "")), "body": str(params.get("body", "")),
    })


def _webhook_preview(ctx: ToolContext, params: dict[str, Any]) -> Preview:
    return Preview("json", {"value": {"POST": params.get("url"), "body": params.get("payload")}})


def _addresses(value: Any) -> list[str]:
    if not value:
        return []
    return [a.strip() for a in str(value).split(",") if a.strip()]


async def _guarded(ctx: ToolContext, method: str, url: str, *, follow_redirects: int = 0, **kwargs: Any) -> str:
    """The call through the egress guard (bot.outbox.egress); a refusal is a ToolError the model reads."""
    try:
        async with guarded_session(ctx.egress, timeout=ctx.http_timeout) as session:
            reply = await request(session, ctx.egress, method, url, follow_redirects=follow_redirects,
                                  read_limit=MAX_READ_BYTES, **kwargs)
    except EgressRefused as exc:
        raise ToolError(str(exc)) from None
    return f"HTTP {reply.status}\n\n{reply.body.decode('utf-8', errors='replace')}"


def demo_toolset(*, fetch_risk: Risk = Risk.HIGH) -> Toolset:
    """The demo tools; `fetch_risk` (SIGNOFF_FETCH_URL_RISK) lets an operator stop asking for fetches."""
    tools = Toolset()

    @tools.tool(read_only=True)
    def list_files(ctx: ToolContext, path: Annotated[str, "a folder inside the workspace"] = ".") -> str:
        """List the files and folders in a workspace folder (folders end with /)."""
        folder = inside(ctx, path)
        if not folder.is_dir():
            raise ToolError(f"{path!r} is not a folder")
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
        lines = [f"{p.name}/" if p.is_dir() else f"{p.name} ({p.stat().st_size} bytes)" for p in entries[:MAX_LIST]]
        if len(entries) > MAX_LIST:
            lines.append(f"… {len(entries) - MAX_LIST} more")
        return "\n".join(lines) or "(empty folder)"

    @tools.tool(read_only=True)
    def read_file(ctx: ToolContext, path: Annotated[str, "a file inside the workspace"]) -> str:
        """Read a text file from the workspace."""
        target = inside(ctx, path)
        if not target.is_file():
            raise ToolError(f"no file {path!r} in the workspace")
        return _read_text(target)

    # High (a person approves) by default: what a GET returns goes to the model and the thread.
    @tools.tool(risk=fetch_risk, read_only=True, timeout=60, summary=lambda p: f"Fetch {p.get('url')}")
    async def fetch_url(ctx: ToolContext, url: Annotated[str, "an http(s) URL", URI]) -> str:
        """Fetch a web page or API with GET and return its status and text."""
        return await _guarded(ctx, "GET", url, follow_redirects=MAX_REDIRECTS)

    @tools.tool(risk=Risk.HIGH, idempotent=True, preview=_write_preview,
                summary=lambda p: f"Write {p.get('path')} ({len(str(p.get('content', '')).splitlines())} lines)")
    def write_file(
        ctx: ToolContext,
        path: Annotated[str, "where to write, inside the workspace"],
        content: Annotated[str, "the whole new content of the file"],
    ) -> str:
        """Create or replace a text file in the workspace."""
        target = inside(ctx, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode())} bytes to {path}"

    @tools.tool(destructive=True, preview=_delete_preview, summary=lambda p: f"Delete {p.get('path')}")
    def delete_file(ctx: ToolContext, path: Annotated[str, "the file to delete, inside the workspace"]) -> str:
        """Delete a file from the workspace. This cannot be undone."""
        target = inside(ctx, path)
        if not target.is_file():
            raise ToolError(f"no file {path!r} in the workspace")
        target.unlink()
        return f"deleted {path}"

    @tools.tool(risk=Risk.HIGH, preview=_email_preview,
                summary=lambda p: f"Send an email to {p.get('to')}: {p.get('subject')}")
    def send_email(
        ctx: ToolContext,
        to: Annotated[str, "the recipient's email address", EMAIL],
        subject: str,
        body: str,
        cc: Annotated[str | None, "more addresses, comma-separated"] = None,
    ) -> str:
        """Send an email (it is written to the outbox folder as an .eml file)."""
        recipients = [to.strip(), *_addresses(cc)]
        bad = [a for a in recipients if not is_email(a)]
        if bad:
            raise ToolError(f"not an email address: {', '.join(repr(a) for a in bad)}; nothing was sent")
        now = datetime.now(UTC)
        message = EmailMessage()
        message["From"] = SENDER
        message["To"] = to.strip()
        if cc:
            message["Cc"] = ", ".join(_addresses(cc))
        message["Subject"] = subject
        message["Date"] = format_datetime(now)
        message["Message-ID"] = make_msgid(domain="signoff.local")
        message["X-Signoff-Run"] = ctx.run_id
        message["X-Signoff-Tool-Use"] = ctx.tool_use_id
        message.set_content(body)
        ctx.email_outbox.mkdir(parents=True, exist_ok=True)
        # A unique name per execution: a second execution would be a second file, never an overwrite.
        path = ctx.email_outbox / f"{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}.eml"
        path.write_bytes(bytes(message))
        return f"email to {', '.join(recipients)} sent (saved as {path.name}), subject: {subject}"

    @tools.tool(risk=Risk.HIGH, idempotent=False, preview=_webhook_preview, timeout=60,
                summary=lambda p: f"POST to {p.get('url')}")
    async def call_webhook(
        ctx: ToolContext,
        url: Annotated[str, "the webhook's http(s) URL", URI],
        payload: Annotated[dict[str, Any], "the JSON body to POST"],
    ) -> str:
        """POST a JSON payload to a webhook (for example to trigger a deploy). Not safe to repeat."""
        return await _guarded(ctx, "POST", url, data=json.dumps(payload), headers={
            "Content-Type": "application/json", "Idempotency-Key": f"{ctx.run_id}:{ctx.tool_use_id}",
        })

    return tools
