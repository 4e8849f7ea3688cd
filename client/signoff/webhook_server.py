"""A small HTTP listener for Signoff's webhooks, on the standard library (no web framework needed).

`serve(handle, port=...)` answers `POST path` with what `handle(raw body, headers)` returns, in a
background thread, until `.close()`. What a delivery means is `handle`'s business (signoff.dbos's
`handle_webhook` checks the signature and wakes a DBOS workflow); this module only keeps the door:

- Only `POST` to `path` (any query string) reaches `handle`: other paths are 404, other methods 405.
- A body must say its length and be at most `MAX_BODY` bytes (411, 413); a client that stops sending
  is dropped after `READ_TIMEOUT` seconds, so a slow sender holds one thread for that long at most.
- `handle` raising is a 500 naming the error's type (logged with its traceback); Signoff retries.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("signoff.webhooks")

MAX_BODY = 1 << 20  # a decided request's JSON is a few KB; Signoff caps what agents send far below this
READ_TIMEOUT = 10.0

Handle = Callable[[bytes, Mapping[str, str]], "tuple[int, dict[str, Any]]"]


class WebhookServer:
    """A running listener: `url` is where it takes deliveries; `close()` stops it and frees the port."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread, path: str) -> None:
        self._server = server
        self._thread = thread
        host, port = server.server_address[:2]
        self.port = int(port)
        self.url = f"http://{host if isinstance(host, str) else host.decode()}:{self.port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(READ_TIMEOUT)

    def __enter__(self) -> WebhookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(handle: Handle, *, port: int, host: str = "127.0.0.1", path: str = "/signoff/webhook") -> WebhookServer:
    """Start listening (port 0: any free port; see `.port`). Raises OSError at once if the port is taken."""
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', not {path!r}")

    class Handler(BaseHTTPRequestHandler):
        timeout = READ_TIMEOUT
        server_version = "signoff-webhooks"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            if urlsplit(self.path).path != path:
                return self._answer(404, {"error": f"nothing at {urlsplit(self.path).path}; deliveries go to {path}"})
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                return self._answer(411, {"error": "Content-Length is required"})
            if int(length) > MAX_BODY:
                return self._answer(413, {"error": f"a webhook body is at most {MAX_BODY} bytes"})
            body = self.rfile.read(int(length))
            try:
                status, answer = handle(body, {k: v for k, v in self.headers.items()})
            except Exception as exc:
                log.exception("handling a webhook failed")
                status, answer = 500, {"error": f"the receiver failed: {type(exc).__name__}"}
            self._answer(status, answer)

        def _refuse(self) -> None:
            if urlsplit(self.path).path != path:
                self._answer(404, {"error": f"nothing at {urlsplit(self.path).path}"})
            else:
                self._answer(405, {"error": "deliveries are POSTed"}, allow="POST")

        do_GET = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

        def _answer(self, status: int, answer: dict[str, Any], **headers: str) -> None:
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name.title(), value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.debug("%s " + format, self.address_string(), *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name=f"signoff-webhooks-{port}", daemon=True)
    thread.start()
    return WebhookServer(server, thread, path)
