"""A TCP proxy on loopback that a test tells to drop connections: a network that fails on cue.

It forwards bytes both ways unchanged and remembers the first line of every request it sees
(enough to tell `POST /api/v1/approvals` from `GET /api/v1/approvals/apr_..?wait=50`). Faults:
- `drop_response_of(prefix)`: the next request starting with `prefix` reaches the server, but its
  response is thrown away and the client's connection closed (the client never learns the outcome);
- `drop_all()`: every open connection is cut now (a dropped Wi-Fi, a restarted load balancer);
- `no_long_polls()`: every `?wait=N` is forwarded as `?wait=0` (a proxy that does not hold requests:
  long-polls come back at once, the request still pending);
- `answer_all(status, headers)`: every request is answered here with `status` (a 503 or 429 storm)
  and never reaches the server, until `forward()`;
- `go_down()` / `come_back()`: the port refuses connections (the server restarting), then listens again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass, field

METHODS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"PATCH ")


@dataclass
class _Conn:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    swallow: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        for writer in (self.client, self.upstream):
            with contextlib.suppress(Exception):
                writer.transport.abort()


class FlakyProxy:
    def __init__(self, upstream_url: str) -> None:
        host_port = upstream_url.split("://", 1)[1].rstrip("/")
        host, port = host_port.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.requests: list[str] = []
        self.connections: list[_Conn] = []
        self._changed = asyncio.Condition()
        self._drop_prefixes: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._no_wait = False
        self._answer: bytes | None = None
        self.port = 0
        self.url = ""

    async def start(self) -> FlakyProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def no_long_polls(self) -> None:
        self._no_wait = True

    def answer_all(self, status: int, headers: dict[str, str] | None = None) -> None:
        """From now on answer every request here with `status` (and cut the connections open now)."""
        body = b'{"error": {"code": "unavailable", "message": "injected by the test"}}'
        head = [f"HTTP/1.1 {status} Injected", "Content-Type: application/json", f"Content-Length: {len(body)}",
                "Connection: close", *(f"{k}: {v}" for k, v in (headers or {}).items())]
        self._answer = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        self.drop_all()

    def forward(self) -> None:
        self._answer = None

    async def go_down(self) -> None:
        """Stop listening (new connections are refused) and cut the open ones."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self.drop_all()

    async def come_back(self) -> None:
        await self.start()

    async def stop(self) -> None:
        self.drop_all()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def drop_response_of(self, prefix: str) -> None:
        self._drop_prefixes.append(prefix.encode())

    def drop_all(self) -> None:
        for conn in list(self.connections):
            conn.close()
        self.connections.clear()

    def seen(self, prefix: str) -> int:
        return sum(1 for r in self.requests if r.startswith(prefix))

    async def wait_for(self, prefix: str, count: int = 1, timeout: float = 10.0) -> None:
        """Until `count` requests starting with `prefix` have been forwarded to the server."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self.seen(prefix) >= count), timeout)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        conn = _Conn(writer, up_writer)
        self.connections.append(conn)
        conn.tasks = [asyncio.create_task(self._pipe_up(conn, reader, up_writer)),
                      asyncio.create_task(self._pipe_down(conn, up_reader, writer))]
        await asyncio.gather(*conn.tasks, return_exceptions=True)
        conn.close()
        if conn in self.connections:
            self.connections.remove(conn)

    async def _pipe_up(self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                if chunk.startswith(METHODS) and self._answer is not None:
                    async with self._changed:
                        self.requests.append(chunk.split(b"\r\n", 1)[0].decode(errors="replace"))
                        self._changed.notify_all()
                    conn.client.write(self._answer)
                    conn.client.close()  # flushes the answer, then closes (Connection: close)
                    await conn.client.wait_closed()
                    break
                if chunk.startswith(METHODS) and self._no_wait:
                    line, _, rest = chunk.partition(b"\r\n")
                    chunk = re.sub(rb"([?&])wait=[^& ]*", rb"\1wait=0", line) + b"\r\n" + rest
                if chunk.startswith(METHODS):
                    line = chunk.split(b"\r\n", 1)[0]
                    for prefix in self._drop_prefixes:
                        if line.startswith(prefix):
                            self._drop_prefixes.remove(prefix)
                            conn.swallow = True
                            break
                writer.write(chunk)
                await writer.drain()
                if chunk.startswith(METHODS):
                    async with self._changed:
                        self.requests.append(chunk.split(b"\r\n", 1)[0].decode(errors="replace"))
                        self._changed.notify_all()
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()

    async def _pipe_down(self, conn: _Conn, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                if conn.swallow:
                    break  # the server answered; the client never hears it
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()
