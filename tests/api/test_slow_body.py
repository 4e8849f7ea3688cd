"""Issue 33: a body that trickles in after complete headers is cut off (SIGNOFF_BODY_TIMEOUT_SECONDS)."""

from __future__ import annotations

import pytest

import asyncio

from bot.sandbox import SlackEmulator
from tests.support.app import API_TOKEN, start_app

pytestmark = pytest.mark.security

HEAD = ("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Authorization: Bearer {token}\r\nContent-Length: 1000\r\n\r\n")


async def trickle(port: int, path: str) -> tuple[bytes, asyncio.StreamWriter]:
    """Send complete headers and a first few bytes of a 1,000-byte body, then a byte now and then;
    return all the server answered (up to its closing the connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEAD.format(path=path, token=API_TOKEN).encode() + b'{"action": ')
    await writer.drain()

    async def drip() -> None:
        while True:
            await asyncio.sleep(0.2)  # deliberate: the slow client under test drips a byte every 0.2 s
            writer.write(b" ")
            await writer.drain()

    async def answer() -> bytes:
        got = b""
        try:
            while chunk := await reader.read(65536):
                got += chunk
        except ConnectionResetError:  # the close met a dripped byte still unread: the kernel resets
            got += b"<reset>"
        return got

    dripping = asyncio.create_task(drip())
    try:
        # The guard only keeps a failure from hanging the suite (the drip would go on for 40 minutes).
        return await asyncio.wait_for(answer(), 60), writer
    finally:
        dripping.cancel()
        await asyncio.gather(dripping, return_exceptions=True)


async def test_a_trickling_body_gets_408_and_the_connection_closes_while_others_are_served(
        db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SIGNOFF_BODY_TIMEOUT_SECONDS="1")
    try:
        port = int(app.url.rsplit(":", 1)[1])
        slow = asyncio.create_task(trickle(port, "/api/v1/approvals"))
        async with app.session.get(f"{app.url}/healthz") as answer:  # served meanwhile
            assert answer.status == 200
        answered, writer = await slow
        writer.close()
        # Closed by the server (before the fix it waited for the body for as long as the drip went on);
        # the 408 is read unless a dripped byte crossed the close and reset the connection first.
        if answered != b"<reset>":
            head, _, body = answered.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408"), answered[:200]
            assert b"body_timeout" in body and b"within 1 s" in body
            assert b"Connection: close" in head
        assert app.signoff is not None
        assert await app.signoff.store.list_requests(status=None, limit=5) == []  # nothing written
    finally:
        await app.stop()


async def test_slack_endpoint_cuts_off_a_trickling_body_too(db_url: str, slack: SlackEmulator) -> None:
    app = await start_app(db_url, slack, SIGNOFF_BODY_TIMEOUT_SECONDS="1")
    try:
        answered, writer = await trickle(int(app.url.rsplit(":", 1)[1]), "/slack/events")
        writer.close()
        assert answered == b"<reset>" or answered.startswith(b"HTTP/1.1 408"), answered[:200]
    finally:
        await app.stop()
