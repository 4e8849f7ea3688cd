"""The sandbox answers only this machine's own pages and clients (`signoff demo`, the Slack emulator).

The demo listens on 127.0.0.1, but a browser on this machine can still be made to reach it from any web
site: by DNS rebinding (a name of the attacker's that resolves to 127.0.0.1, so the request's `Host` is
theirs) and by a cross-site form post (a page elsewhere that posts to http://127.0.0.1:3000/...). The
page's actions sign what they post like Slack, so such a post would click, approve and type as any
sandbox person. So:

- `Host` must name the loopback interface: `localhost` (or `*.localhost`), `127.x.x.x` or `[::1]`, any
  port. Anything else is 403.
- A write (POST, PUT, PATCH, DELETE) that a browser marks as coming from another site is 403: an
  `Origin` other than the request's own (`http://` + its `Host`), `Origin: null`, or `Sec-Fetch-Site`
  other than `same-origin` or `none`. Clients that send neither header (curl, the bot's own calls to the
  emulated Web API, SDKs) are not browsers and pass.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def loopback_host(host: str) -> bool:
    """Whether a `Host` header (name or address, with or without a port) names this machine's loopback."""
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:3000
        name = name[1:].split("]", 1)[0]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    name = name.rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def cross_site(request: web.Request) -> str | None:
    """Why a write comes from another site (a browser says so), or None."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site.lower() not in ("same-origin", "none"):
        return f"Sec-Fetch-Site: {site}"
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() != f"{request.scheme}://{request.host}".lower():
        return f"Origin: {origin}"
    return None


def refusal(message: str) -> web.Response:
    return web.json_response({"error": {"code": "forbidden", "message": message}}, status=403)


@web.middleware
async def local_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not loopback_host(request.host):
        return refusal(f"the sandbox answers requests for localhost only, not Host {request.host!r} "
                       "(open it at http://127.0.0.1:<port>/)")
    if request.method in WRITES and (why := cross_site(request)) is not None:
        return refusal(f"the sandbox refuses writes from another site ({why})")
    return await handler(request)
