"""Signed decisions (issue 37): the server signs every ended request with Ed25519; the agent side checks the
signature before anything runs. A man in the middle (tests/fakes/tamper_proxy.py) between the agent and
the real server alters a decision, hands over another request's signature, or replays another request's
genuine decision: the client, `@require_approval` and the Claude Code hook refuse each, and nothing runs.
The key is made on the first start and kept (the database), served at /.well-known/signoff-keys and printed
by `signoff keys`; a receipt is checked offline by `signoff verify`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import signoff.signatures as sig
from bot.api.webhooks import sign
from bot.domain import signatures as server_side
from bot.sandbox import SlackEmulator
from signoff import AsyncSignoffClient, SignatureInvalid, SignoffClient, require_approval
from signoff._hash import params_sha256
from signoff.webhooks import read
from tests.api.test_approvals_api import Receiver
from tests.fakes.tamper_proxy import TamperProxy
from tests.client.claude_cli import signoff_command
from tests.client.helpers import pending_id
from tests.support.app import API_TOKEN, ROOT, WEBHOOK_SECRET, App, start_app

pytestmark = pytest.mark.security


@pytest.fixture(autouse=True)
def fresh_keyring() -> Iterator[None]:
    """Each test starts with no key trusted (as a new agent process does) and leaves none behind."""
    sig.reset({})
    yield
    sig.reset({})


@pytest_asyncio.fixture
async def proxy(app: App) -> AsyncIterator[TamperProxy]:
    running = await TamperProxy(app.url).start()
    try:
        yield running
    finally:
        await running.stop()


async def public_key(app: App) -> str:
    """SIGNOFF_PUBLIC_KEY as an operator pins it: read from the server itself, not through the proxy."""
    status, body = await app.api("GET", "/.well-known/signoff-keys", auth=False)
    assert status == 200, body
    [key] = body["keys"]
    assert key["alg"] == "Ed25519"
    return f"{key['kid']}:{key['public_key']}"


async def decided(app: App, **overrides: Any) -> dict[str, Any]:
    """A request approved by a person's click, as the API returns it (signed)."""
    req = await app.submit(**overrides)
    await app.click(req["id"], "U1", user_name="alice")
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=10")
    assert body["status"] == "approved" and body["signature"]["alg"] == "Ed25519"
    return dict(body)


def when_decided(change: Any) -> Any:
    """A tamper that rewrites only the answers that carry a decision (pending ones pass untouched)."""
    def tamper(body: dict[str, Any]) -> dict[str, Any]:
        return change(body) if body.get("status") in sig.FINAL else body
    return tamper


def altered(body: dict[str, Any]) -> dict[str, Any]:
    """Another recipient, with the params hash made to match (so only the signature can tell)."""
    params = {**body["decision"]["params"], "to": "attacker@evil.example"}
    body["decision"] = {**body["decision"], "params": params, "params_sha256": params_sha256(params)}
    return body


async def test_an_altered_decision_is_refused_by_require_approval_and_nothing_runs(app: App,
                                                                                   proxy: TamperProxy) -> None:
    sig.reset({"SIGNOFF_PUBLIC_KEY": await public_key(app)})
    proxy.tamper = when_decided(altered)
    ran: list[str] = []

    @require_approval(summary="Email {to}", channel="C1", approvers=["U1"],
                      client=SignoffClient(proxy.url, API_TOKEN))
    def send_email(to: str) -> None:
        ran.append(to)

    calling = asyncio.create_task(asyncio.to_thread(send_email, "customer@example.com"))
    await app.click(await pending_id(app), "U1", user_name="alice")
    with pytest.raises(SignatureInvalid, match="does not match"):
        await calling
    assert ran == [] and proxy.tampered > 0


async def test_another_requests_signature_is_refused(app: App, proxy: TamperProxy) -> None:
    sig.reset({"SIGNOFF_PUBLIC_KEY": await public_key(app)})
    earlier = await decided(app)
    proxy.tamper = when_decided(lambda body: {**body, "signature": earlier["signature"]})
    async with AsyncSignoffClient(proxy.url, API_TOKEN) as client:
        asking = asyncio.create_task(client.request_approval("send_email", {"to": "customer@example.com"},
                                                             summary="Email", channel="C1", approvers=["U1"]))
        await app.click(await pending_id(app), "U1", user_name="alice")
        with pytest.raises(SignatureInvalid, match="does not match"):
            await asking


@pytest.mark.parametrize("keep_id", [False, True], ids=["as-is", "id-rewritten"])
async def test_an_old_decision_replayed_for_a_new_request_is_refused(app: App, proxy: TamperProxy,
                                                                     keep_id: bool) -> None:
    """The earlier request's genuine, signed approval of the same action, handed over as the new one's."""
    sig.reset({"SIGNOFF_PUBLIC_KEY": await public_key(app)})
    earlier = await decided(app, action={"name": "send_email", "params": {"to": "customer@example.com"}})
    proxy.tamper = lambda body: {**earlier, "id": body["id"]} if keep_id else earlier
    async with AsyncSignoffClient(proxy.url, API_TOKEN) as client:
        submitted = await client.submit("send_email", {"to": "customer@example.com"}, summary="Email",
                                        channel="C1", approvers=["U1"])
        with pytest.raises(SignatureInvalid, match="does not match" if keep_id else "Idempotency-Key"):
            # The real request stays pending: its long-poll answers when `timeout` runs out, tampered into
            # the earlier decision, which is what must be refused (a longer wait tests nothing more).
            await client.wait(submitted.id, timeout=1)


async def test_an_unsigned_decision_is_refused_once_the_servers_key_is_pinned(app: App,
                                                                              proxy: TamperProxy) -> None:
    """No SIGNOFF_PUBLIC_KEY: the client fetches the server's key once (before its first call) and pins it."""
    proxy.tamper = when_decided(lambda body: {k: v for k, v in body.items() if k != "signature"})
    with SignoffClient(proxy.url, API_TOKEN) as client:
        asking = asyncio.create_task(asyncio.to_thread(
            client.request_approval, "send_email", {"to": "customer@example.com"}, summary="Email",
            channel="C1", approvers=["U1"]))
        await app.click(await pending_id(app), "U1", user_name="alice")
        with pytest.raises(SignatureInvalid, match="not signed"):
            await asking
    assert sig.keyring().trusted()
    proxy.tamper = None
    with SignoffClient(proxy.url, API_TOKEN) as client:  # the same server, untouched answers: accepted
        asking = asyncio.create_task(asyncio.to_thread(
            client.request_approval, "send_email", {"to": "b@example.com"}, summary="Email", channel="C1",
            approvers=["U1"]))
        await app.click(await pending_id(app), "U1", user_name="alice")
        assert (await asking).params == {"to": "b@example.com"}


FORGED_INPUT = {"file_path": "/etc/passwd", "content": "owned"}


def forged_hook_answer(body: dict[str, Any], *, drop_request: bool) -> dict[str, Any]:
    """The hook endpoint's answer to a command hook, rewritten: the allow's input, and the signed request
    it carries (or that request dropped)."""
    reply = body.get("signoff")
    if not isinstance(reply, dict) or reply["request"].get("status") not in sig.FINAL:
        return body
    request = reply["request"]
    out = {**body["hookSpecificOutput"], "updatedInput": FORGED_INPUT}
    if drop_request:
        return {"hookSpecificOutput": out}
    return {"hookSpecificOutput": out, "signoff": {**reply, "request": {**altered(request), "decision": {
        **request["decision"], "params": FORGED_INPUT, "params_sha256": params_sha256(FORGED_INPUT)}}}}


@pytest.mark.parametrize("drop_request", [False, True], ids=["altered", "unsigned"])
async def test_the_claude_code_hook_denies_a_forged_approval(app: App, drop_request: bool) -> None:
    """The command hook forwards to the server's hook endpoint; the allow it gets back is checked against
    the signed request the endpoint sends with it."""
    key = await public_key(app)
    proxy = await TamperProxy(app.url, paths=("/api/v1/hooks/claude-code",)).start()
    proxy.tamper = lambda body: forged_hook_answer(body, drop_request=drop_request)
    payload = {"session_id": "5d7a", "tool_use_id": "toolu_forged_1", "cwd": "/home/dev/acme",
               "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Write",
               "tool_input": {"file_path": "/home/dev/acme/notes.txt", "content": "hello"}}
    env = {**os.environ, "SIGNOFF_URL": proxy.url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1",
           "SIGNOFF_APPROVERS": "U1", "SIGNOFF_PUBLIC_KEY": key, "PYTHONPATH": str(ROOT)}
    try:
        hook = await asyncio.create_subprocess_exec(
            *signoff_command().split(), "hook", "claude-code", env=env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        answering = asyncio.create_task(hook.communicate(json.dumps(payload).encode()))
        await app.click(await pending_id(app), "U1", user_name="alice")
        out, err = await asyncio.wait_for(answering, 60)
    finally:
        await proxy.stop()
    assert proxy.tampered
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny", (answer, err.decode())
    assert "signature" in answer["permissionDecisionReason"] or "signed" in answer["permissionDecisionReason"]
    assert "updatedInput" not in answer  # nothing of the forged input reaches Claude Code


async def run_verify(receipt: Path, key: str) -> tuple[int, str]:
    return await run_verify_with(receipt, "--key", key)


async def run_verify_with(receipt: Path, *args: str) -> tuple[int, str]:
    """`signoff verify RECEIPT ARGS...` as a process: (exit code, stdout and stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *signoff_command().split(), "verify", str(receipt), *args, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, (out + err).decode()


async def test_a_receipt_is_checked_offline(app: App, tmp_path: Path) -> None:
    key = await public_key(app)
    body = await decided(app)
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(body))
    code, said = await run_verify(receipt, key)
    assert code == 0 and f"valid: request {body['id']} approved" in said
    receipt.write_text(json.dumps(altered(body)))
    code, said = await run_verify(receipt, key)
    assert code == 1 and "INVALID" in said


async def test_the_key_is_made_on_first_start_kept_and_printed_by_signoff_keys(db_url: str,
                                                                                slack: SlackEmulator) -> None:
    keys = []
    for _ in range(2):  # a restart on the same database signs with the same key
        running = await start_app(db_url, slack, SIGNOFF_SIGNING_KEY="")
        try:
            keys.append(await public_key(running))
            status, listed = await running.api("GET", "/api/v1/keys")
            assert status == 200 and f"{listed['keys'][0]['kid']}:{listed['keys'][0]['public_key']}" == keys[-1]
        finally:
            await running.stop()
    assert keys[0] == keys[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "keys", env={**os.environ, "DATABASE_URL": db_url, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT))
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == f"SIGNOFF_PUBLIC_KEY={keys[0]}"


def test_the_server_and_the_agent_side_sign_the_same_bytes() -> None:
    body = {"id": "apr_1", "kind": "approval", "status": "approved",
            "action": {"name": "pay", "params": {"amount": 1.5, "to": "ünï"}},
            "decision": {"outcome": "approved", "params": {"amount": 2, "to": "x"}, "decided_at": "2026-12-06T00:00:00Z",
                         "items": None}, "answers": None}
    assert server_side.signed_bytes(body, "k1") == sig.signed_bytes(body, "k1")
    assert server_side.signed_fields(body, "k1").keys() == sig.signed_fields(body, "k1").keys()


async def test_the_decided_webhook_carries_the_same_signature(db_url: str, slack: SlackEmulator) -> None:
    """A webhook receiver (signoff.webhooks.read: HMAC first) checks the decision's own signature too."""
    app = await start_app(db_url, slack, SIGNOFF_EGRESS_ALLOW="127.0.0.1")
    try:
        sig.reset({"SIGNOFF_PUBLIC_KEY": await public_key(app)})
        async with Receiver([200]) as receiver:
            req = await app.submit(callback_url=receiver.url)
            await app.click(req["id"], "U1", user_name="alice")
            await receiver.wait_for(1, timeout=30)
        headers, raw = receiver.deliveries[0]
        hook = read(raw, headers, WEBHOOK_SECRET)
        assert hook.decision is not None and hook.decision.approved  # checked against the pinned key
        assert hook.request["signature"]["kid"] == (await public_key(app)).split(":")[0]
        forged = json.dumps({**json.loads(raw), "request": altered(dict(hook.request))}).encode()
        with pytest.raises(SignatureInvalid):
            final = read(forged, {**headers, "X-Signoff-Signature": sign_hmac(forged, headers)}, WEBHOOK_SECRET)
            _ = final.decision
    finally:
        await app.stop()


def sign_hmac(raw: bytes, headers: dict[str, str]) -> str:
    """The HMAC a holder of SIGNOFF_WEBHOOK_SECRET could forge: the decision's signature still catches it."""
    return sign(WEBHOOK_SECRET, headers["X-Signoff-Timestamp"], raw)
