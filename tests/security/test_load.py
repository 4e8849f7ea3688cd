"""Issue 33: nothing an agent sends can stall the server (half-sent requests, costly params checks)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.sandbox import SlackEmulator
from tests.harness import start_app


async def test_a_half_sent_request_is_closed_while_a_normal_one_is_served(db_url: str, slack: SlackEmulator,
                                                                         tmp_path: Path) -> None:
    app = await start_app(db_url, slack, SIGNOFF_HEADER_TIMEOUT_SECONDS="0.5")
    try:
        port = int(app.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /api/v1/approvals HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")  # and stalls
        await writer.drain()
        async with app.session.get(f"{app.url}/healthz") as answer:  # others are served meanwhile
            assert answer.status == 200
        # The server closes the stalled connection (EOF, no answer). The guard only keeps a failure from
        # hanging the suite: aiohttp's own default would hold the connection for an hour.
        assert await asyncio.wait_for(reader.read(), 30) == b""
        writer.close()
    finally:
        await app.stop()
