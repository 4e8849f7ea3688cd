"""Resume claims held by the server (`/api/v1/resumes`), over HTTP, on the engine under test.

Racing claims end with one winner, a lease runs out on the server's clock (moved by the test), keys
are per token, and bad input is refused with the field named and nothing stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio

from bot.sandbox import SlackEmulator
from signoff import AsyncSignoffClient
from signoff.resumes import ResumeTaken
from tests.support.app import App, ShiftedClock, start_app

TOKENS = "agent-a:token-aaaaaaaa:agent,agent-b:token-bbbbbbbb:agent"
A, B = ({"Authorization": "Bearer token-aaaaaaaa"}, {"Authorization": "Bearer token-bbbbbbbb"})


@pytest.fixture
def clock() -> ShiftedClock:
    return ShiftedClock()


@pytest_asyncio.fixture
async def served(db_url: str, slack: SlackEmulator, clock: ShiftedClock) -> AsyncIterator[App]:
    running = await start_app(db_url, slack, clock=clock, SIGNOFF_API_TOKENS=TOKENS)
    try:
        yield running
    finally:
        await running.stop()


async def claim(app: App, key: str, owner: str, who: dict[str, str] = A, **extra: Any) -> tuple[int, Any]:
    return await app.api("POST", "/api/v1/resumes", json={"key": key, "owner": owner, **extra}, headers=who)


def path(key: str, action: str = "") -> str:
    return f"/api/v1/resumes/{quote(key, safe='')}" + (f"/{action}" if action else "")


async def test_a_claim_is_held_by_its_owner_until_finished(served: App) -> None:
    status, body = await claim(served, "langgraph:t-1:i-1", "host|1|aa", lease_seconds=60, request_ids=["apr_1"])
    assert status == 200, body
    assert body["won"] is True and body["state"] == "resuming" and body["owner"] == "host|1|aa"
    assert body["key"] == "langgraph:t-1:i-1" and body["request_ids"] == ["apr_1"] and body["lease_until"]
    again, body2 = await claim(served, "langgraph:t-1:i-1", "host|1|aa", lease_seconds=120)
    assert again == 200 and body2["won"] is True and body2["lease_until"] > body["lease_until"]  # the same owner
    taken, refused = await claim(served, "langgraph:t-1:i-1", "host|2|bb")
    assert taken == 409, refused
    assert refused["error"]["code"] == "resume_taken" and "host|1|aa" in refused["error"]["message"]
    assert refused["error"]["details"] == [{"state": "resuming", "owner": "host|1|aa",
                                            "lease_until": body2["lease_until"]}]
    status, finished = await served.api("POST", path("langgraph:t-1:i-1", "finish"), headers=A,
                                        json={"owner": "host|1|aa", "state": "done"})
    assert status == 200 and finished["state"] == "done", finished
    status, read = await served.api("GET", path("langgraph:t-1:i-1"), headers=A)
    assert status == 200 and read["state"] == "done" and read["owner"] == "host|1|aa"
    for owner in ("host|1|aa", "host|2|bb"):  # done is final: nobody claims it again, not even its owner
        status, refused = await claim(served, "langgraph:t-1:i-1", owner)
        assert status == 409 and refused["error"]["details"][0]["state"] == "done"


async def test_fifty_racing_claims_have_one_winner(served: App, clock: ShiftedClock) -> None:
    async def race(key: str) -> list[int]:
        answers = await asyncio.gather(*(claim(served, key, f"host|{n}|racer", lease_seconds=30) for n in range(50)))
        return [status for status, _ in answers]

    assert sorted(await race("race:new")) == [200] + [409] * 49  # a new key
    clock.advance(31)  # its lease ran out: now everyone may take it over, and exactly one does
    assert sorted(await race("race:new")) == [200] + [409] * 49
    status, read = await served.api("GET", path("race:new"), headers=A)
    assert status == 200 and read["state"] == "resuming"


async def test_a_lease_runs_out_on_the_servers_clock(served: App, clock: ShiftedClock) -> None:
    assert (await claim(served, "k", "first", lease_seconds=5))[0] == 200
    clock.advance(4)
    assert (await claim(served, "k", "second"))[0] == 409  # 1 s left
    status, renewed = await served.api("POST", path("k", "renew"), headers=A, json={"owner": "first", "lease_seconds": 5})
    assert status == 200, renewed
    clock.advance(4)
    assert (await claim(served, "k", "second"))[0] == 409  # the renewal moved the lease
    clock.advance(2)
    status, took = await claim(served, "k", "second", lease_seconds=60)
    assert status == 200 and took["owner"] == "second"  # the first owner is presumed dead
    for action, body in (("renew", {"owner": "first"}), ("finish", {"owner": "first", "state": "done"})):
        status, refused = await served.api("POST", path("k", action), headers=A, json=body)
        assert status == 409 and refused["error"]["code"] == "resume_taken", refused
        assert refused["error"]["details"][0]["owner"] == "second"
    finish = {"owner": "second", "state": "failed", "error": "GraphRecursionError: too deep"}
    assert (await served.api("POST", path("k", "finish"), headers=A, json=finish))[0] == 200
    status, again = await served.api("POST", path("k", "finish"), headers=A, json=finish)
    assert status == 200 and again["state"] == "failed" and again["error"] == finish["error"]  # a retry: the same
    status, other = await served.api("POST", path("k", "finish"), headers=A, json={**finish, "state": "done"})
    assert status == 409 and other["error"]["details"][0]["state"] == "failed"
    clock.advance(3600)
    assert (await claim(served, "k", "third"))[0] == 409  # failed is final too


async def test_keys_are_the_tokens_own(served: App) -> None:
    assert (await claim(served, "shared-name", "owner-a", A))[0] == 200
    status, body = await claim(served, "shared-name", "owner-b", B)
    assert status == 200 and body["owner"] == "owner-b"  # another token's key of the same text: another claim
    assert (await served.api("GET", path("shared-name"), headers=A))[1]["owner"] == "owner-a"
    assert (await served.api("GET", path("shared-name"), headers=B))[1]["owner"] == "owner-b"
    assert (await claim(served, "only-a", "owner-a", A))[0] == 200
    status, missing = await served.api("GET", path("only-a"), headers=B)
    assert status == 404 and missing["error"]["code"] == "not_found"
    status, missing = await served.api("POST", path("only-a", "finish"), headers=B,
                                       json={"owner": "owner-a", "state": "done"})  # knowing the owner is not enough
    assert status == 404
    assert (await served.api("GET", path("only-a"), headers=A))[1]["state"] == "resuming"
    assert (await served.api("GET", path("only-a"), auth=False))[0] == 401


@pytest.mark.parametrize(("body", "field"), [
    ({"owner": "o"}, "key"),
    ({"key": "", "owner": "o"}, "key"),
    ({"key": "k" * 201, "owner": "o"}, "key"),
    ({"key": "k"}, "owner"),
    ({"key": "k", "owner": "o" * 201}, "owner"),
    ({"key": "k", "owner": "o", "lease_seconds": 4}, "lease_seconds"),
    ({"key": "k", "owner": "o", "lease_seconds": 3601}, "lease_seconds"),
    ({"key": "k", "owner": "o", "lease_seconds": "60"}, "lease_seconds"),
    ({"key": "k", "owner": "o", "lease_seconds": True}, "lease_seconds"),
    ({"key": "k", "owner": "o", "request_ids": ["apr"] * 101}, "request_ids"),
    ({"key": "k", "owner": "o", "request_ids": "apr_1"}, "request_ids"),
    ({"key": "k", "owner": "o", "state": "done"}, "state"),
])
async def test_a_bad_claim_names_its_field_and_stores_nothing(served: App, body: dict[str, Any], field: str) -> None:
    status, refused = await served.api("POST", "/api/v1/resumes", json=body, headers=A)
    assert status == 400, refused
    assert refused["error"]["code"] == "invalid_request"
    assert [d["field"] for d in refused["error"]["details"]] == [field], refused
    key = body.get("key") or "k"
    if 1 <= len(key) <= 200:
        assert (await served.api("GET", path(key), headers=A))[0] == 404


async def test_bad_renewals_and_finishes_are_refused_and_change_nothing(served: App) -> None:
    assert (await claim(served, "k", "o", lease_seconds=60))[0] == 200
    before = (await served.api("GET", path("k"), headers=A))[1]
    for action, body, field in (("finish", {"owner": "o", "state": "resuming"}, "state"),
                                ("finish", {"owner": "o"}, "state"),
                                ("finish", {"owner": "o", "state": "done", "error": "e" * 2001}, "error"),
                                ("renew", {"owner": "o", "lease_seconds": 0}, "lease_seconds"),
                                ("renew", {"lease_seconds": 60}, "owner")):
        status, refused = await served.api("POST", path("k", action), headers=A, json=body)
        assert status == 400 and [d["field"] for d in refused["error"]["details"]] == [field], refused
    status, refused = await served.api("POST", path("k", "renew"), headers={**A, "Content-Type": "application/json"},
                                       data=b"{not json")
    assert status == 400 and "not valid JSON" in refused["error"]["message"]
    assert (await served.api("GET", path("k"), headers=A))[1] == before
    status, missing = await served.api("POST", path("nope", "renew"), headers=A, json={"owner": "o"})
    assert status == 404 and "nope" in missing["error"]["message"]


async def test_a_token_that_floods_claims_is_answered_429(db_url: str, slack: SlackEmulator) -> None:
    running = await start_app(db_url, slack, SIGNOFF_API_TOKENS=TOKENS, SIGNOFF_SUBMIT_BURST_PER_TOKEN="3",
                              SIGNOFF_SUBMIT_RATE_PER_TOKEN="0.01")
    try:
        assert [(await claim(running, f"k{n}", "o"))[0] for n in range(3)] == [200] * 3
        status, refused = await claim(running, "k3", "o")
        assert status == 429 and "resume calls" in refused["error"]["message"], refused
        assert (await claim(running, "k3", "o", B))[0] == 200  # the other token's bucket is its own
        assert (await running.api("GET", path("k3"), headers=A))[0] == 404  # nothing stored for the refused one
    finally:
        await running.stop()


async def test_the_python_clients_claim_renew_and_finish(served: App, clock: ShiftedClock) -> None:
    key = "langgraph:thread/with slashes:100%:ü"  # percent-encoded whole in the path
    async with AsyncSignoffClient(served.url, "token-aaaaaaaa") as first, \
            AsyncSignoffClient(served.url, "token-aaaaaaaa") as second:
        held = await first.claim_resume(key, lease_seconds=30, request_ids=["apr_1", "apr_2"])
        assert held is not None and held.state == "resuming" and held.request_ids == ("apr_1", "apr_2")
        assert held.owner.count("|") == 2  # host|pid|random
        assert await second.claim_resume(key) is None  # taken: None, not an error
        assert (await first.claim_resume(key, held.owner)) is not None  # the same owner again
        renewed = await first.renew_resume(held)
        assert renewed.lease_until is not None and held.lease_until is not None and renewed.lease_until >= held.lease_until
        clock.advance(31)
        taken = await second.claim_resume(key, "second-owner")
        assert taken is not None and taken.owner == "second-owner"
        with pytest.raises(ResumeTaken) as lost:
            await first.renew_resume(held)
        assert lost.value.owner == "second-owner" and lost.value.state == "resuming" and lost.value.status == 409
        with pytest.raises(ResumeTaken):
            await first.finish_resume(held)
        assert (await second.finish_resume(taken)).state == "done"
        assert (await second.finish_resume(taken)).state == "done"  # a retried finish
    from signoff import SignoffClient

    def blocking() -> None:
        with SignoffClient(served.url, "token-aaaaaaaa") as sync:
            assert sync.claim_resume(key) is None  # done
            mine = sync.claim_resume("sync-key", lease_seconds=10)
            assert mine is not None and sync.renew_resume(mine, lease_seconds=20).lease_seconds == 20
            assert sync.finish_resume(mine, "failed", "boom").state == "failed"
            with pytest.raises(ResumeTaken) as refused:
                sync.finish_resume(mine, "done")
            assert refused.value.state == "failed"

    await asyncio.to_thread(blocking)


async def test_the_api_pages_curl_example_runs_as_written(served: App) -> None:
    """docs/api.md's Resume claims example, run by bash and curl against this server."""
    import os
    import subprocess

    from tests.support.docs import fenced, page

    script = fenced(page("docs/api.md"), "sh", after="## Resume claims")
    env = {"PATH": os.environ["PATH"], "TOKEN": "token-aaaaaaaa"}
    lines = script.replace("localhost:3000", served.url)
    done = await asyncio.to_thread(subprocess.run, ["bash", "-euo", "pipefail", "-c", lines], env=env,
                                   capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    status, read = await served.api("GET", path("langgraph:refund-1234:7f3a"), headers=A)
    assert status == 200 and read["state"] == "done" and read["owner"] == "host-a|4242|1b2c"
