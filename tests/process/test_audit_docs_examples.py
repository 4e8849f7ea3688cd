"""The examples of docs/audit.md and docs/signatures.md, pasted into bash as a terminal would run them,
against a running server and its database."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import sys
from pathlib import Path

import pytest

from tests.support.docs import doc_example
from bot.sandbox import SlackEmulator
from tests.support.app import TEST_SIGNING_KEY, App, start_app
from tests.support.outbox import finished

ADMIN, AGENT = "tok-docs-admin-1", "tok-docs-agent-1"
VENV_BIN = Path(sys.executable).parent


# The harness's app, with an admin and an agent token; its client is the admin.
pytestmark = pytest.mark.settings(token=ADMIN, SIGNOFF_API_TOKENS=f"ops:{ADMIN}:admin,bot:{AGENT}:agent")


def terminal(app: App, db_url: str, **more: str) -> dict[str, str]:
    """A terminal where the operator exported what the pages use."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "SLACK_")) and k != "DATABASE_URL"}
    return {**env, "PATH": os.pathsep.join([str(VENV_BIN), env.get("PATH", "/usr/bin:/bin")]),
            "DATABASE_URL": db_url, "SIGNOFF_URL": app.url, "SIGNOFF_SIGNING_KEY": TEST_SIGNING_KEY,
            "SIGNOFF_ADMIN_TOKEN": ADMIN, "SIGNOFF_TOKEN": AGENT, **more}


async def paste(name: str, cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec("bash", "-c", doc_example(name), cwd=cwd, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    return proc.returncode or 0, out.decode(), err.decode()


async def decided(app: App, **overrides: object) -> str:
    req = await app.submit(**overrides)
    await app.click(req["id"], "U1", user_name="alice")
    await finished(app)  # the click is acked first and decided right after
    return str(req["id"])


async def test_the_audit_pages_examples(app: App, db_url: str, tmp_path: Path) -> None:
    request_id = await decided(app)
    env = terminal(app, db_url)
    code, out, err = await paste("audit-verify", tmp_path, env)
    assert code == 0 and out.startswith("audit chain intact: "), err
    code, out, err = await paste("audit-api", tmp_path, env)
    assert code == 0, err
    items = json.loads(out)["items"]
    assert [r["request_id"] for r in items if r["type"] == "decided"] == [request_id]
    code, _, err = await paste("audit-export", tmp_path, env)
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "audit.csv").open()))
    assert request_id in {r["request_id"] for r in rows} and all(r["hash"] for r in rows)
    assert (tmp_path / "rejected.jsonl").read_text() == ""  # nothing was rejected


async def test_the_signature_pages_examples(app: App, db_url: str, tmp_path: Path) -> None:
    env = terminal(app, db_url)
    code, out, err = await paste("signing-keys", tmp_path, env)
    assert code == 0, err
    served, _, printed = out.partition("SIGNOFF_PUBLIC_KEY=")  # curl's JSON ends without a newline
    [key] = json.loads(served)["keys"]
    public = f"{key['kid']}:{key['public_key']}"
    assert printed.strip() == public
    status, _ = await app.api("POST", "/api/v1/approvals", headers={"Authorization": f"Bearer {AGENT}"},
                              json={"action": {"name": "send_email", "params": {"to": "a@example.com"}},
                                    "summary": "Email", "channel": "C1", "approvers": ["U1"]})
    assert status == 201
    _, listing = await app.api("GET", "/api/v1/approvals?status=pending")
    [pending] = listing["items"]
    await app.click(pending["id"], "U1", user_name="alice")
    await finished(app)
    code, out, err = await paste("verify-receipt", tmp_path,
                                 {**env, "SIGNOFF_PUBLIC_KEY": public, "REQUEST_ID": pending["id"]})
    assert code == 0, err
    assert out.startswith(f"valid: request {pending['id']} approved at ") and key["kid"] in out


async def test_the_rotation_and_anchor_examples(db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
    """docs/signatures.md's rotation and whole-key-list receipt check, docs/audit.md's anchor: on the
    database's keys (rotation needs them), anchoring often."""
    running = await start_app(db_url, slack, SIGNOFF_API_TOKENS=f"ops:{ADMIN}:admin,bot:{AGENT}:agent",
                              SIGNOFF_SIGNING_KEY="", SIGNOFF_AUDIT_ANCHOR_SECONDS="0.05", SIGNOFF_SWEEP_SECONDS="0.05")
    running.headers = {"Authorization": f"Bearer {ADMIN}"}
    try:
        _, keys = await running.api("GET", "/.well-known/signoff-keys", auth=False)
        first = keys["keys"][0]["kid"]
        request_id = await decided(running)
        _, receipt = await running.api("GET", f"/api/v1/approvals/{request_id}")
        (tmp_path / "receipt.json").write_text(json.dumps(receipt))  # signed by the first key
        env = terminal(running, db_url, SIGNOFF_SIGNING_KEY="", OLD_KID=first)
        code, out, err = await paste("key-rotation", tmp_path, env)
        assert code == 0, err
        assert out.startswith("rotated: ") and f"retired: {first}" in out and "status=current" in out, out
        code, out, err = await paste("verify-receipt-keys", tmp_path, env)
        assert code == 0 and f"signed by key {first}" in out, err  # decided before the key was retired

        for _ in range(3000):  # the server's sweep anchors the head
            _, head = await running.api("GET", "/api/v1/audit/head")
            if head["anchor"] is not None:
                break
            await asyncio.sleep(0.01)
        code, out, err = await paste("audit-anchor", tmp_path, env)
        assert code == 0 and "it extends the anchor of" in out, (out, err)
    finally:
        await running.stop()
