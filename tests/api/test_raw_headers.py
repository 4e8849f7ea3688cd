"""Header bytes no HTTP client library would send (not UTF-8, not latin-1), written to the socket as they are."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest

from tests.support.app import API_TOKEN, App

pytestmark = pytest.mark.security

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "raw", "version": "1"}}}).encode()


async def raw_request(url: str, method: str, path: str, headers: list[tuple[bytes, bytes]],
                      body: bytes = b"") -> tuple[int, bytes]:
    """Send one HTTP/1.1 request byte for byte; (status, the response's head and as much body as came)."""
    where = urlsplit(url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    try:
        head = [f"{method} {path} HTTP/1.1".encode(), f"Host: {where.netloc}".encode(),
                b"Connection: close", f"Content-Length: {len(body)}".encode()]
        head += [name + b": " + value for name, value in headers]
        writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)  # Connection: close: until the server closes
    finally:
        writer.close()
    return int(answer.split(b" ", 2)[1]), answer


@pytest.mark.parametrize("value", [
    b"Bearer \xff\xfe\xfa",  # not UTF-8
    "Bearer jeton-€-secret".encode(),  # UTF-8, not latin-1
    b"Bearer " + API_TOKEN.encode() + b"\xff",  # the right token with a stray byte
    b"\xff\xfe \x80",  # not even the scheme
])
async def test_mcp_refuses_an_authorization_header_of_any_bytes_with_401(app: App, value: bytes) -> None:
    status, answer = await raw_request(app.url, "POST", "/mcp", [
        (b"Authorization", value), (b"Content-Type", b"application/json"),
        (b"Accept", b"application/json, text/event-stream")], INIT)
    assert status == 401, answer
    assert b'"unauthorized"' in answer and b'WWW-Authenticate: Bearer realm="signoff"' in answer


async def test_mcp_with_a_good_token_and_another_header_of_any_bytes_is_served(app: App) -> None:
    status, answer = await raw_request(app.url, "POST", "/mcp", [
        (b"Authorization", b"Bearer " + API_TOKEN.encode()), (b"Content-Type", b"application/json"),
        (b"Accept", b"application/json, text/event-stream"), (b"X-Note", b"\xe2\x82\xac \xff")], INIT)
    assert status == 200, answer
    assert b'"serverInfo"' in answer
