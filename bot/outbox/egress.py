"""The egress guard: every outbound call to a URL an agent or an API client chose goes through here.

Invariant: Signoff never opens a connection, for such a URL, to an address that is not public
(loopback, link-local incl. cloud metadata, RFC 1918, CGNAT, IPv6 ULA and link-local, unspecified,
multicast, reserved), however the address is spelled, unless the operator allowed it
(`SIGNOFF_EGRESS_ALLOW`: host names and CIDRs).

How it holds:
- `check_url` resolves the host the way the socket layer will (getaddrinfo: so `2130706433`,
  `0x7f.1`, `[::ffff:127.0.0.1]` all become the address they mean) and refuses if ANY address
  it resolves to is refused, before anything is sent.
- The session's connector resolves names through `GuardedResolver`, which applies the same check
  to the addresses the connection will actually use: a name that re-resolves to a private address
  between the check and the connect (DNS rebinding) is refused there, and the connector connects
  only to addresses that passed.
- Redirects are never followed by aiohttp: `request` follows them itself (when asked to) and
  checks every hop like the first URL.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

RESOLVE_TIMEOUT = 5.0
MAX_REDIRECTS = 5
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class EgressRefused(Exception):
    """An outbound call to a URL that leads somewhere Signoff may not go; the message says why."""


class Unresolvable(EgressRefused):
    """The host did not resolve (now): not a refusal of the address, so it may work later."""


@dataclass(frozen=True)
class EgressPolicy:
    """Hosts (exact names, or `*.example.com`) and networks the operator opened on purpose."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> EgressPolicy:
        hosts: set[str] = set()
        networks: list[Network] = []
        for entry in entries:
            network = parse_network(entry)
            if network is not None:
                networks.append(network)
            else:
                hosts.add(entry.strip().lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.hosts or any(h.startswith("*.") and host.endswith(h[1:]) for h in self.hosts)

    def refusal(self, address: IPAddress) -> str | None:
        """None if a connection to `address` is fine, else what kind of address it is."""
        if any(address in n for n in self.networks):
            return None
        return forbidden_kind(address)


def parse_network(entry: str) -> Network | None:
    """`entry` as an IP network (a bare address is a /32 or /128), or None if it is not one."""
    try:
        return ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        return None


def forbidden_kind(address: IPAddress) -> str | None:
    """Why `address` is not a public one, or None. Embedded IPv4 (mapped, 6to4, Teredo) is checked too."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if embedded is not None:
            inner = forbidden_kind(embedded)
            if inner is not None:
                return inner
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "shared (CGNAT)"
    if address.is_private:
        return "private"
    if not address.is_global or address.is_reserved:
        return "reserved"
    return None


def _address(sockaddr_host: str) -> IPAddress:
    return ipaddress.ip_address(sockaddr_host.split("%", 1)[0])


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address the socket layer would use for `host` (numeric spellings included)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout=RESOLVE_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise Unresolvable(f"cannot resolve {host!r}: {exc or type(exc).__name__}") from None
    return [_address(str(info[4][0])) for info in infos]


def _split(url: str | URL) -> tuple[URL, str, int]:
    parsed = url if isinstance(url, URL) else URL(url)
    if parsed.scheme not in ("http", "https"):
        raise EgressRefused("only http:// and https:// URLs are allowed")
    host = parsed.raw_host
    if not host:
        raise EgressRefused("the URL has no host")
    return parsed, host.strip("[]"), parsed.port or (443 if parsed.scheme == "https" else 80)


async def check_url(url: str | URL, policy: EgressPolicy, *, unresolvable_ok: bool = False) -> None:
    """Raise EgressRefused unless every address `url`'s host resolves to may be connected to.

    `unresolvable_ok`: a name that does not resolve now passes (used at submit time, where the
    receiver may be down; delivery checks again).
    """
    try:
        _, host, port = _split(url)
    except ValueError as exc:
        raise EgressRefused(f"not a valid URL: {exc}") from None
    if policy.host_allowed(host):
        return
    try:
        addresses = await resolve(host, port)
    except Unresolvable:
        if unresolvable_ok and parse_network(host) is None:
            return
        raise
    _refuse_any(host, addresses, policy)


def _refuse_any(host: str, addresses: Iterable[IPAddress], policy: EgressPolicy) -> None:
    for address in addresses:
        kind = policy.refusal(address)
        if kind is not None:
            shown = host if host == str(address) else f"{host} ({address})"
            raise EgressRefused(f"{shown} is not a public address ({kind}); Signoff does not connect there "
                                "(an operator can allow it with SIGNOFF_EGRESS_ALLOW)")


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, checked: the connector only ever sees (and connects to) vetted addresses."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy
        self._inner = ThreadedResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if not self.policy.host_allowed(host):
            _refuse_any(host, (_address(r["host"]) for r in results), self.policy)
        return results

    async def close(self) -> None:
        await self._inner.close()


def guarded_session(policy: EgressPolicy, *, timeout: float) -> aiohttp.ClientSession:
    """A session whose connections go only where the policy allows (no proxies from the environment)."""
    connector = aiohttp.TCPConnector(resolver=GuardedResolver(policy), limit=100)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout),
                                 trust_env=False)


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    url: str


async def request(
    session: aiohttp.ClientSession, policy: EgressPolicy, method: str, url: str, *,
    follow_redirects: int = 0, read_limit: int = 200_000, **kwargs: Any,
) -> Reply:
    """One guarded request; with `follow_redirects` > 0, up to that many redirects, each checked.

    A redirect that is not followed comes back as it is (its 3xx status).
    """
    current = URL(url)
    for _ in range(follow_redirects + 1):
        await check_url(current, policy)
        async with session.request(method, current, allow_redirects=False, **kwargs) as response:
            location = response.headers.get("Location")
            if response.status in (301, 302, 303, 307, 308) and location and follow_redirects:
                current = current.join(URL(location))
                if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                    method, kwargs = "GET", {k: v for k, v in kwargs.items() if k not in ("data", "json")}
                continue
            body = await response.content.read(read_limit)
            return Reply(response.status, body, str(current))
    raise EgressRefused(f"more than {follow_redirects} redirects")
