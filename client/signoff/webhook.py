"""Receive Signoff's signed decision webhooks, so a waiting process is woken by a push, not by polling.

    with WebhookReceiver(secret=os.environ["SIGNOFF_WEBHOOK_SECRET"], port=8377) as hook:
        client.submit(..., callback_url=hook.url)   # Signoff POSTs the decision there
        hook.wait_beyond(seen, timeout=60)          # True as soon as a (new) decision arrives

Signoff POSTs `{"type": "approval.decided" | "approval.undelivered", "request": {...}}` with
`X-Signoff-Timestamp`, `X-Signoff-Delivery` and `X-Signoff-Signature: v1=<hex HMAC-SHA256(secret,
"v1:{timestamp}:{body}")>` (the server's bot/api/webhooks.py). A delivery counts only when its
signature is the server's and its timestamp within `tolerance` seconds of this machine's clock:
anything else is answered 401 and wakes nobody. A delivery is at least once (retried until a 2xx):
a repeated `X-Signoff-Delivery` is answered 200 and counted once. Bodies are read only with a
Content-Length of at most `MAX_BODY` bytes, each connection has `TIMEOUT` seconds to send it.

The receiver wakes; it does not decide. What a decision says is read again from Signoff by whoever
it woke (`SignoffClient.get`), so a lost, late or repeated webhook changes nothing but when.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from signoff.errors import SignoffError
from signoff.webhooks import sign, verify  # one signature check for every receiver

log = logging.getLogger("signoff.webhook")

MAX_BODY = 1024 * 1024
TIMEOUT = 10.0
EVENTS = ("approval.decided", "approval.undelivered")
STOP_CHECK = 0.25  # how soon a blocking wait notices its `stop` (a threading.Event cannot wake a Condition)
_SEEN_MAX = 10_000  # delivery ids remembered for deduplication (oldest forgotten first)


class WebhookReceiver:
    """A small HTTP server (the standard library's, one thread per connection) for Signoff's webhooks.

    `url` is what to give Signoff as `callback_url` (`public_url` when Signoff reaches this machine by
    another name). `count` goes up by one for each new, verified delivery; `wait_beyond(seen, t)` and
    `await await_beyond(seen, t)` return True once it passed `seen`, False after `t` seconds."""

    def __init__(self, secret: str, *, host: str = "127.0.0.1", port: int = 0, path: str = "/signoff/webhook",
                 public_url: str | None = None, tolerance: float = 300) -> None:
        if not secret:
            raise SignoffError("a webhook receiver needs the server's SIGNOFF_WEBHOOK_SECRET to check signatures")
        self.secret, self.path, self.tolerance = secret, path, tolerance
        self.count = 0
        self.refused = 0
        self.decided: OrderedDict[str, dict[str, Any]] = OrderedDict()  # request id -> its JSON, newest last
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._changed = threading.Condition()
        self._wakers: set[Callable[[], None]] = set()
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        bound = self._server.server_address
        self._url = public_url or f"http://{host}:{bound[1]}{path}"
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self._url

    def start(self) -> WebhookReceiver:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, name="signoff-webhook", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_beyond(self, seen: int, timeout: float, stop: threading.Event | None = None) -> bool:
        """True once `count` passed `seen`; False after `timeout` seconds, or soon after `stop` is set."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.count <= seen:
                left = deadline - time.monotonic()
                if left <= 0 or (stop is not None and stop.is_set()):
                    return False
                self._changed.wait(min(left, STOP_CHECK) if stop is not None else left)
            return True

    async def await_beyond(self, seen: int, timeout: float) -> bool:
        loop, woken = asyncio.get_running_loop(), asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(woken.set)

        with self._changed:
            if self.count > seen:
                return True
            self._wakers.add(wake)
        try:
            await asyncio.wait_for(woken.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            with self._changed:
                self._wakers.discard(wake)
        return self.count > seen

    # -- called by the handler's threads ------------------------------------------------------

    def _accept(self, delivery: str, body: dict[str, Any]) -> None:
        found = body.get("request")
        request: dict[str, Any] = found if isinstance(found, dict) else {}
        with self._changed:
            if delivery in self._seen:
                return
            self._seen[delivery] = None
            while len(self._seen) > _SEEN_MAX:
                self._seen.popitem(last=False)
            if request.get("id"):
                self.decided[str(request["id"])] = request
                self.decided.move_to_end(str(request["id"]))
                while len(self.decided) > _SEEN_MAX:
                    self.decided.popitem(last=False)
            self.count += 1
            self._changed.notify_all()
            wakers = list(self._wakers)
        for wake in wakers:
            wake()


def _handler(receiver: WebhookReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = TIMEOUT  # the connection's socket timeout: a slow sender is dropped
        server_version = "signoff-webhook"

        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            if self.path.split("?")[0] != receiver.path:
                return self._answer(404, "not_found")
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return self._answer(411, "length_required")
            if not 0 <= length <= MAX_BODY:
                return self._answer(413, "body_too_large")
            raw = self.rfile.read(length)
            if not verify(receiver.secret, self.headers.get("X-Signoff-Timestamp") or "", raw,
                          self.headers.get("X-Signoff-Signature") or "", tolerance=receiver.tolerance):
                receiver.refused += 1
                log.warning("refused a webhook with a bad or stale signature from %s", self.client_address[0])
                return self._answer(401, "bad_signature")
            try:
                body = json.loads(raw)
            except ValueError:
                return self._answer(400, "not_json")
            if not isinstance(body, dict) or body.get("type") not in EVENTS:
                return self._answer(200, "ignored")  # signed, but not a decision: nothing to wake for
            receiver._accept(self.headers.get("X-Signoff-Delivery") or hashlib.sha256(raw).hexdigest(), body)
            return self._answer(200, "ok")

        def _answer(self, status: int, word: str) -> None:
            data = json.dumps({"status": word}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
            log.debug("webhook %s", format % args)

    return Handler
