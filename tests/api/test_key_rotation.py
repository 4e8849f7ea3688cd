"""Key rotation (issue 37): `signoff keys rotate` makes a new decision-signing key current; the earlier
keys stay published at /.well-known/signoff-keys (ids, since/until), so decisions and receipts they
signed still verify, offline too; an agent that trusts the old key takes the new one on its first
decision signed by it (one bounded refresh), only because the old key endorses it, so a proxy cannot
slip its own key in; `signoff keys retire KID` withdraws an earlier key, and a decision signed by it after
that is refused. Rotation survives a restart and reaches every replica sharing the database."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

import signoff.signatures as sig
from bot.approvals.keys import Signer
from bot.domain.values import from_iso
from bot.sandbox import SlackEmulator
from signoff import AsyncSignoffClient, SignatureInvalid
from storage.signing_keys import SigningKeyStore
from tests.api.test_signed_decisions import run_verify_with
from tests.client.claude_cli import signoff_command
from tests.client.helpers import pending_id
from tests.fakes.tamper_proxy import TamperProxy
from tests.support.app import API_TOKEN, ROOT, App, start_app
from tests.support.audit import signoff

DB_KEYS = {"SIGNOFF_SIGNING_KEY": "", "SIGNOFF_SWEEP_SECONDS": "0.05"}  # the database's keys, read every sweep

pytestmark = [pytest.mark.security, pytest.mark.settings(**DB_KEYS)]  # the `app` fixture's settings


async def keys_of(app: App) -> list[dict[str, Any]]:
    status, body = await app.api("GET", "/.well-known/signoff-keys", auth=False)
    assert status == 200, body
    return list(body["keys"])


async def current_is(app: App, kid: str) -> list[dict[str, Any]]:
    """The keys `app` serves once `kid` is its current key (a replica sees a rotation at its next sweep)."""
    for _ in range(3000):
        keys = await keys_of(app)
        if keys[0]["kid"] == kid and keys[0]["status"] == "current":
            return keys
        await asyncio.sleep(0.01)  # test-side: waiting for the replica's sweep
    raise AssertionError(f"{app.url} never made {kid} current: {await keys_of(app)}")


async def rotate(db_url: str) -> str:
    code, out, err = await signoff(db_url, "keys", "rotate")
    assert code == 0, err
    assert out.startswith("rotated: "), out
    return out.split()[1]


async def approved_through(client: AsyncSignoffClient, app: App, to: str) -> Any:
    """A request submitted by `client`, approved in Slack, its decision as `client` reads (and checks) it."""
    submitted = await client.submit("send_email", {"to": to}, summary="Email", channel="C1", approvers=["U1"])
    await app.click(submitted.id, "U1", user_name="alice")
    return await client.wait(submitted.id, timeout=30)


async def signed_body(app: App, request_id: str) -> dict[str, Any]:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=10")
    assert body["status"] == "approved", body
    return dict(body)


async def verifies_offline(tmp_path: Path, receipt: dict[str, Any], keys: list[dict[str, Any]], kid: str) -> None:
    """`signoff verify` of `receipt` (left in tmp_path/receipt.json) against `keys` as a file: signed by `kid`."""
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    code, said = await run_verify_with(tmp_path / "receipt.json", "--keys", str(tmp_path / "keys.json"))
    assert code == 0 and f"signed by key {kid}" in said, said


async def test_rotation_keeps_old_keys_published_and_the_agent_takes_the_new_one(
        db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
    app = await start_app(db_url, slack, **DB_KEYS)
    try:
        keys, first, receipt, new = await rotated_under_an_agent(app, db_url)
    finally:
        await app.stop()

    # The receipt signed by the first key still verifies offline, against the published keys.
    await verifies_offline(tmp_path, receipt, keys, first["kid"])
    code, said = await run_verify_with(tmp_path / "receipt.json", "--key", f"{new}:{keys[0]['public_key']}")
    assert code == 1 and "does not trust" in said, said  # the new key alone does not cover the old receipt

    again = await start_app(db_url, slack, **DB_KEYS)  # a restart keeps both, the new one current
    try:
        assert [k["kid"] for k in await keys_of(again)] == [new, first["kid"]]
    finally:
        await again.stop()


async def rotated_under_an_agent(app: App, db_url: str) -> tuple[list[dict[str, Any]], dict[str, Any],
                                                                 dict[str, Any], str]:
    """An agent approved once under the first key, the key rotated, the agent approved again."""
    [first] = await keys_of(app)
    assert first["status"] == "current" and "since" in first and "until" not in first
    async with AsyncSignoffClient(app.url, API_TOKEN) as client:
        before = await approved_through(client, app, "a@example.com")
        assert before.approved and sig.keyring().fetches == 1  # trusted on first use
        receipt = await signed_body(app, before.request_id)
        assert receipt["signature"]["kid"] == first["kid"]

        new = await rotate(db_url)
        keys = await current_is(app, new)
        assert [k["kid"] for k in keys] == [new, first["kid"]]
        old = keys[1]
        assert old["status"] == "previous" and old["public_key"] == first["public_key"]
        assert from_iso(old["until"]) >= from_iso(old["since"])
        assert keys[0]["endorsed_by"] == first["kid"] and keys[0]["endorsement"]

        after = await approved_through(client, app, "b@example.com")  # signed by the new key: one refresh
        assert after.approved and sig.keyring().fetches == 2
        assert (await signed_body(app, after.request_id))["signature"]["kid"] == new
    return keys, first, receipt, new


def forge(seed: str) -> Any:
    """A tamper that signs every decided body with another key (the body itself unchanged)."""
    forger = Signer.from_seed(seed)

    def tamper(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("status") in sig.FINAL:
            return forger.sign({k: v for k, v in body.items() if k != "signature"})
        return body
    return tamper


async def test_a_refresh_takes_no_key_the_trusted_one_does_not_endorse(app: App) -> None:
    from bot.approvals.keys import b64, new_seed

    evil_seed = new_seed()
    evil = Signer.from_seed(evil_seed)
    proxy = await TamperProxy(app.url, paths=("/api/v1/approvals", sig.KEYS_PATH)).start()
    try:
        async with AsyncSignoffClient(proxy.url, API_TOKEN) as client:
            assert (await approved_through(client, app, "a@example.com")).approved  # the real key, first use
            signing = forge(evil_seed)

            def tamper(body: dict[str, Any]) -> dict[str, Any]:
                if "keys" in body:  # the proxy publishes its key, "endorsed" by itself
                    return {"keys": [*body["keys"], {"kid": evil.kid, "alg": "Ed25519", "status": "current",
                                                     "public_key": b64(evil.public_raw), "endorsed_by": evil.kid,
                                                     "endorsement": "AAAA"}]}
                return signing(body)
            proxy.tamper = tamper
            for to in ("b@example.com", "c@example.com"):
                with pytest.raises(SignatureInvalid, match="does not trust"):
                    await approved_through(client, app, to)
            assert sig.keyring().fetches == 2  # one refresh for the unknown key, not one per decision
            assert not sig.keyring().knows(evil.kid)
    finally:
        await proxy.stop()


async def test_a_retired_key_verifies_what_it_signed_before_and_nothing_after(app: App, db_url: str,
                                                                             tmp_path: Path) -> None:
    [first] = await keys_of(app)
    async with AsyncSignoffClient(app.url, API_TOKEN) as client:
        receipt = await signed_body(app, (await approved_through(client, app, "a@example.com")).request_id)
    new = await rotate(db_url)
    await current_is(app, new)

    code, _, err = await signoff(db_url, "keys", "retire", new)
    assert code == 1 and "is the current key: rotate first" in err, err
    code, out, err = await signoff(db_url, "keys", "retire", first["kid"])
    assert code == 0 and out.startswith(f"retired: {first['kid']}"), err
    code, _, err = await signoff(db_url, "keys", "retire", first["kid"])
    assert code == 1 and "retired already" in err, err
    code, _, err = await signoff(db_url, "keys", "retire", "0123456789abcdef")
    assert code == 1 and "no signing key has the id" in err, err
    code, out, _ = await signoff(db_url, "keys")
    assert out.strip() == f"SIGNOFF_PUBLIC_KEY={new}:{(await keys_of(app))[0]['public_key']}"  # retired: not listed

    keys = await keys_of(app)
    retired = next(k for k in keys if k["kid"] == first["kid"])
    assert retired["status"] == "retired" and from_iso(retired["retired_at"]) >= from_iso(retired["until"])

    # Whoever holds the retired key's private half signs a new decision with it: refused.
    [old_row] = [k for k in await SigningKeyStore(app.signoff.store).all() if k.kid == first["kid"]]  # type: ignore[union-attr]
    proxy = await TamperProxy(app.url).start()
    try:
        proxy.tamper = forge(old_row.private_key)
        async with AsyncSignoffClient(proxy.url, API_TOKEN) as client:
            with pytest.raises(SignatureInvalid, match="retired"):
                await approved_through(client, app, "b@example.com")
    finally:
        await proxy.stop()

    # What it signed before it was retired still verifies offline.
    await verifies_offline(tmp_path, receipt, keys, first["kid"])


async def test_two_replicas_and_two_racing_rotations_end_with_one_current_key(db_url: str,
                                                                              slack: SlackEmulator) -> None:
    first_app = await start_app(db_url, slack, **DB_KEYS)
    second_app = await start_app(db_url, slack, **DB_KEYS)
    try:
        [k1] = await keys_of(first_app)
        assert [k["kid"] for k in await keys_of(second_app)] == [k1["kid"]]  # one key for both
        results = await asyncio.gather(signoff(db_url, "keys", "rotate"), signoff(db_url, "keys", "rotate"))
        won = [out.split()[1] for code, out, _ in results if code == 0]
        lost = [err for code, _, err in results if code != 0]
        assert len(won) >= 1 and all("another rotation made a new key meanwhile" in e for e in lost), results
        stored = await SigningKeyStore(first_app.signoff.store).all()  # type: ignore[union-attr]
        assert len(stored) == 1 + len(won) and [k.current for k in stored].count(True) == 1
        current = stored[0].kid
        assert current in won
        await current_is(first_app, current)
        await current_is(second_app, current)
        req = await first_app.submit()
        await first_app.click(req["id"], "U1", user_name="alice")
        for replica in (first_app, second_app):  # each replica signs with the current key
            assert (await signed_body(replica, req["id"]))["signature"]["kid"] == current
    finally:
        await second_app.stop()
        await first_app.stop()


def test_the_server_and_the_agent_side_endorse_the_same_bytes() -> None:
    from bot.domain import signatures as server_side

    assert server_side.endorsed_bytes("k1", "cHVi") == sig.endorsed_bytes("k1", "cHVi")


async def hook_answer(app: App, public_key: str, call_id: str) -> dict[str, Any]:
    """Claude Code's command hook, trusting `public_key` (SIGNOFF_PUBLIC_KEY), on a Write a person approves."""
    payload = {"session_id": "5d7a", "tool_use_id": call_id, "cwd": "/home/dev/acme", "permission_mode": "default",
               "hook_event_name": "PreToolUse", "tool_name": "Write",
               "tool_input": {"file_path": "/home/dev/acme/notes.txt", "content": "hello"}}
    env = {**os.environ, "SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN, "SIGNOFF_CHANNEL": "C1",
           "SIGNOFF_APPROVERS": "U1", "SIGNOFF_PUBLIC_KEY": public_key, "PYTHONPATH": str(ROOT)}
    hook = await asyncio.create_subprocess_exec(
        *signoff_command().split(), "hook", "claude-code", env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    answering = asyncio.create_task(hook.communicate(json.dumps(payload).encode()))
    await app.click(await pending_id(app), "U1", user_name="alice")
    out, err = await asyncio.wait_for(answering, 60)
    return dict(json.loads(out)["hookSpecificOutput"], stderr=err.decode())


async def test_a_hook_configured_with_the_old_key_follows_the_rotation(app: App, db_url: str) -> None:
    [first] = await keys_of(app)
    new = await rotate(db_url)
    await current_is(app, new)
    answer = await hook_answer(app, f"{first['kid']}:{first['public_key']}", "toolu_rotated_1")
    assert answer["permissionDecision"] == "allow", answer  # the new key, endorsed by the configured one

    from bot.approvals.keys import b64, new_seed

    stranger = Signer.from_seed(new_seed())  # a key that endorses nothing the server has
    answer = await hook_answer(app, f"{stranger.kid}:{b64(stranger.public_raw)}", "toolu_rotated_2")
    assert answer["permissionDecision"] == "deny" and "does not trust" in answer["permissionDecisionReason"], answer
