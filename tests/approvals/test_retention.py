"""Retention (SIGNOFF_RETENTION_DAYS, issue 39): decided requests older than N days leave the hot tables at a
timer sweep, pending ones and recent ones stay, a GET of an archived id says so (410), and the audit log is
kept whole: its rows still name their tool and `signoff audit verify` still proves the chain. Through the
running app over HTTP, on the suite's engine; the clock is the test's (FakeClock), the sweep the job's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from bot.approvals.retention import Retention
from bot.process.settings import Settings, SettingsError
from bot.sandbox import SlackEmulator
from tests.approvals.timer_steps import tick
from tests.fakes.clock import FakeClock
from tests.support.app import API_TOKEN, App, app_env, bearer, start_app
from tests.support.audit import signoff
from tests.support.outbox import finished, settle

DAYS = 30
OTHER_TOKEN = "other-agent-token-1"


@pytest_asyncio.fixture
async def rapp(db_url: str, slack: SlackEmulator, clock: FakeClock) -> AsyncIterator[App]:
    """Retention on, requests with no timer of their own (a pending one stays pending for months)."""
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_SWEEP_SECONDS="3600",
                              SIGNOFF_RETENTION_DAYS=str(DAYS), SIGNOFF_TIMEOUT="off", SIGNOFF_REMIND_EVERY="off",
                              SIGNOFF_API_TOKENS=f"{API_TOKEN},other:{OTHER_TOKEN}:agent")
    try:
        yield running
    finally:
        await running.stop()


async def decided(app: App, *, cancel: bool = False) -> str:
    """A request approved by a click (or cancelled by its agent), everything it caused delivered."""
    request = await app.submit()
    if cancel:
        await app.card(request["id"])
        assert (await app.api("POST", f"/api/v1/approvals/{request['id']}/cancel", json={"reason": "done"}))[0] == 200
    else:
        await app.click(request["id"], "U1")
    await finished(app)
    status, body = await app.api("GET", f"/api/v1/approvals/{request['id']}")
    assert status == 200 and body["status"] != "pending", body
    return str(request["id"])


async def test_old_decided_requests_are_archived_pending_and_recent_ones_kept_audit_still_verifies(
        rapp: App, clock: FakeClock, db_url: str) -> None:
    approved, cancelled = await decided(rapp), await decided(rapp, cancel=True)
    waiting = (await rapp.submit())["id"]
    await settle(rapp)

    await tick(rapp, clock, days=DAYS - 1)  # not old enough yet
    for kept in (approved, cancelled, waiting):
        assert (await rapp.api("GET", f"/api/v1/approvals/{kept}"))[0] == 200

    recent = await decided(rapp)  # decided now: 1 day old at the next tick
    await tick(rapp, clock, days=2)
    for gone, outcome in ((approved, "approved"), (cancelled, "cancelled")):
        status, body = await rapp.api("GET", f"/api/v1/approvals/{gone}")
        assert status == 410, body
        assert body["error"]["code"] == "archived"
        assert f"({outcome}) was archived" in body["error"]["message"]
        assert "SIGNOFF_RETENTION_DAYS" in body["error"]["message"]
    status, body = await rapp.api("GET", f"/api/v1/approvals/{waiting}")
    assert (status, body["status"]) == (200, "pending")
    status, body = await rapp.api("GET", f"/api/v1/approvals/{recent}")
    assert (status, body["status"]) == (200, "approved")
    listed = (await rapp.api("GET", "/api/v1/approvals?limit=100"))[1]["items"]
    assert sorted(r["id"] for r in listed) == sorted([waiting, recent])
    assert (await rapp.api("GET", "/api/v1/approvals/apr_never_was"))[0] == 404  # unknown ids: still 404
    # Another agent's token learns nothing of an archived request: the same 404 as for an unknown id.
    status, body = await rapp.api("GET", f"/api/v1/approvals/{approved}", headers=bearer(OTHER_TOKEN))
    assert (status, body["error"]["code"]) == (404, "not_found"), body

    # The audit log is whole: every archived request's rows are there, still naming their tool.
    status, page = await rapp.api("GET", "/api/v1/audit?limit=500")
    assert status == 200, page
    rows = [r for r in page["items"] if r["request_id"] in (approved, cancelled)]
    assert {r["type"] for r in rows} >= {"created", "decided"}
    assert {r["tool"] for r in rows} == {"send_email"}
    status, by_tool = await rapp.api("GET", "/api/v1/audit?limit=500&tool=send_email")
    assert {r["request_id"] for r in by_tool["items"]} >= {approved, cancelled, waiting, recent}
    code, out, err = await signoff(db_url, "audit", "verify")
    assert code == 0, out + err
    assert "audit chain intact" in out, out


async def test_one_replica_at_a_time_runs_retention(rapp: App, clock: FakeClock) -> None:
    """The job's claim: another process's Retention finds it taken until it is due again."""
    assert rapp.signoff is not None
    await decided(rapp)
    await tick(rapp, clock, days=DAYS + 1)  # this app's sweep claimed it and archived the request
    other = Retention(rapp.signoff.store, clock, DAYS)
    assert not (await other.tick()).claimed
    clock.advance(hours=2)  # due again: whoever sweeps first takes it; nothing is left to archive
    again = await other.tick()
    assert again.claimed and again.archived == 0


@pytest.mark.parametrize("raw", ["0", "-3", "abc", "30d", "1.5", "36501"])
def test_a_bad_retention_setting_stops_start_up_with_one_line_naming_it(raw: str, slack: SlackEmulator) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env(app_env("sqlite:///unused.db", slack, SIGNOFF_RETENTION_DAYS=raw), dotenv=None)
    message = str(info.value)
    assert message.startswith(f"SIGNOFF_RETENTION_DAYS={raw!r} must be a whole number of days from 1 to 36500"), message
    assert "\n" not in message


@pytest.mark.parametrize(("raw", "days"), [("90", 90), ("off", None), (" 7 ", 7)])
def test_a_good_retention_setting_is_read(raw: str, days: int | None, slack: SlackEmulator) -> None:
    settings = Settings.from_env(app_env("sqlite:///unused.db", slack, SIGNOFF_RETENTION_DAYS=raw), dotenv=None)
    assert settings.retention_days == days
