"""The egress guard (issue 9, defects 1 and 2): agent- and API-chosen URLs never reach non-public addresses.

Every loopback spelling is tried against a real server on 127.0.0.1, so a guard that let it
through would be caught by the server answering, not only by an exception's absence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from bot.domain.model import Action, Risk
from bot.outbox.egress import EgressPolicy, EgressRefused, GuardedResolver, check_url, guarded_session, request
from bot.approvals.service import ApprovalSpec
from tests.agent.conftest import agent_env
from tests.agent.helpers import AgentApp
from bot.sandbox.model import FakeAnthropic, message, text, tool_use
from bot.sandbox import SlackEmulator as FakeSlack
from tests.support.app import App, approval_body, start_app
from tests.support.waits import until

pytestmark = pytest.mark.security

APPROVALS = "/api/v1/approvals"


class Site:
    """A small web server on 127.0.0.1 that records which paths were asked for."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        if request.path == "/start":
            raise web.HTTPFound(f"http://localhost:{self.port}/hop")
        if request.path == "/hop":  # the chain ends inside: on a loopback address that is not allowed
            raise web.HTTPFound(f"http://127.0.0.1:{self.port}/latest/meta-data/secret")
        return web.Response(text=f"you reached {request.path}: TOP-SECRET")

    async def __aenter__(self) -> Site:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.port = self.runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


@pytest_asyncio.fixture
async def site() -> AsyncIterator[Site]:
    async with Site() as running:
        yield running


# The spellings of addresses Signoff must never connect to ({port} is the local site's port).
SPELLINGS = [
    "http://127.0.0.1:{port}/x",
    "http://[::1]:{port}/x",
    "http://[::ffff:127.0.0.1]:{port}/x",
    "http://2130706433:{port}/x",
    "http://0x7f.1:{port}/x",
    "http://0177.0.0.1:{port}/x",
    "http://127.1:{port}/x",
    "http://localhost:{port}/x",
    "http://0.0.0.0:{port}/x",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://100.64.0.1/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://[::]/",
    "http://[2002:7f00:1::]/",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_guard_refuses_every_spelling_of_a_non_public_address(site: Site, spelling: str) -> None:
    url = spelling.format(port=site.port)
    async with guarded_session(EgressPolicy(), timeout=5) as session:
        with pytest.raises(EgressRefused, match="not a public address"):
            await request(session, EgressPolicy(), "GET", url)
    assert site.hits == []


async def test_connector_refuses_a_name_even_when_the_caller_skips_the_check(site: Site) -> None:
    """The check that counts is on the address connected to: a name that resolves (again, maybe
    differently: DNS rebinding) to loopback is refused by the session's resolver itself."""
    async with guarded_session(EgressPolicy(), timeout=5) as session:
        with pytest.raises(EgressRefused):
            await session.get(f"http://localhost:{site.port}/x")
    with pytest.raises(EgressRefused):
        await GuardedResolver(EgressPolicy()).resolve("localhost", site.port)
    assert site.hits == []


async def test_allowlist_opens_a_named_host_or_a_network_and_nothing_else(site: Site) -> None:
    by_name = EgressPolicy.from_entries(["localhost"])
    async with guarded_session(by_name, timeout=5) as session:
        reply = await request(session, by_name, "GET", f"http://localhost:{site.port}/ok")
        assert reply.status == 200 and b"/ok" in reply.body
        with pytest.raises(EgressRefused):  # the name is open, its address spelled out is not
            await request(session, by_name, "GET", f"http://127.0.0.1:{site.port}/no")
    by_cidr = EgressPolicy.from_entries(["127.0.0.0/8"])
    await check_url(f"http://2130706433:{site.port}/", by_cidr)
    with pytest.raises(EgressRefused):
        await check_url("http://10.0.0.1/", by_cidr)
    assert site.hits == ["/ok"]


async def test_every_redirect_hop_is_checked(site: Site) -> None:
    policy = EgressPolicy.from_entries(["localhost"])
    async with guarded_session(policy, timeout=5) as session:
        with pytest.raises(EgressRefused, match="127.0.0.1"):
            await request(session, policy, "GET", f"http://localhost:{site.port}/start", follow_redirects=5)
    assert site.hits == ["/start", "/hop"]  # never the metadata-like path at the end


# -- callback_url: at submit, and again at delivery ------------------------------------------------------


@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_callback_url_to_a_non_public_address_is_a_400_naming_the_field(
    app: App, site: Site, spelling: str,
) -> None:
    status, body = await app.api("POST", APPROVALS, json=approval_body(callback_url=spelling.format(port=site.port)))
    assert status == 400, body
    assert body["error"]["details"][0]["field"] == "callback_url"
    assert "not a public address" in body["error"]["message"]
    assert await app.signoff.store.list_requests(status=None, limit=10) == []  # type: ignore[union-attr]


async def test_callback_url_is_checked_again_at_delivery(app: App, site: Site) -> None:
    """A name that pointed somewhere public at submit and to loopback at delivery gets nothing."""
    assert app.signoff is not None
    body = approval_body()
    spec = ApprovalSpec(action=Action(body["action"]["name"], body["action"]["params"]), summary="hook",
                        risk=Risk.HIGH, channel="C1", approvers=("U1",),
                        callback_url=f"http://localhost:{site.port}/hook")
    created, _ = await app.signoff.service.submit(spec)
    await app.click(created.id, "U1")
    store = app.signoff.store

    async def dead() -> bool:
        items = [i for i in await store.outbox_items(created.id) if i.kind == "webhook"]
        return bool(items) and items[0].status == "dead"

    await until(dead, "the webhook to be dead in the outbox")
    [item] = [i for i in await store.outbox_items(created.id) if i.kind == "webhook"]
    assert item.status == "dead" and "not a public address" in (item.last_error or "")
    assert site.hits == []


# -- fetch_url in a run: asks first, then the guard ------------------------------------------------------


async def test_fetch_url_asks_first_and_a_redirect_into_loopback_is_refused(
    db_url: str, slack: FakeSlack, model: FakeAnthropic, tmp_path: Path, site: Site,
) -> None:
    running = await start_app(db_url, slack, **agent_env(model, tmp_path, SIGNOFF_EGRESS_ALLOW="localhost"))
    agent = AgentApp(running, model, tmp_path)
    try:
        model.script(
            message(tool_use("fetch_url", {"url": f"http://localhost:{site.port}/start"}, id="toolu_get")),
            message(text("Could not fetch it.")),
        )
        run = await agent.start("Read the page")
        [call] = await agent.waiting_calls(run["id"])  # a card, not a silent fetch
        assert site.hits == []
        await agent.app.click(call["request_id"], "U1")
        done = await agent.wait_status(run["id"], "completed", "failed")
    finally:
        await running.stop()
    assert done["status"] == "completed", done
    assert site.hits == ["/start", "/hop"]
    [result] = [b for b in model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert result["is_error"] is True and "not a public address" in str(result["content"])
    assert "TOP-SECRET" not in str(model.requests[1])
