"""A NUL byte anywhere an agent can put one (the path, the query, a JSON string or key) is a clear
4xx that writes nothing, on both engines. PostgreSQL's text columns cannot hold U+0000, so before
this each of these reached the driver and answered 500."""

from __future__ import annotations

import pytest

from tests.support.app import App, approval_body

pytestmark = pytest.mark.security

PATHS = ["/api/v1/approvals/%00", "/api/v1/approvals/apr_%00x", "/api/v1/runs/%00", "/api/v1/resumes/%00",
         "/api/v1/approvals?after=%00", "/api/v1/approvals?status=pending%00", "/api/v1/approvals?key=a%00b"]


@pytest.mark.parametrize("path", PATHS)
async def test_a_nul_in_the_path_or_query_is_a_4xx(app: App, path: str) -> None:
    status, body = await app.api("GET", path)
    assert 400 <= status < 500, (path, status, body)
    assert body["error"]["code"] in ("invalid_request", "not_found"), body


async def test_a_nul_in_a_grant_revoke_path_is_a_4xx(app: App) -> None:
    status, body = await app.api("POST", "/api/v1/grants/%00/revoke", json={})
    assert 400 <= status < 500, (status, body)


@pytest.mark.parametrize("where", ["summary", "param value", "param key", "context", "requested_by"])
async def test_a_nul_in_a_submitted_string_is_a_400_naming_it_and_writes_nothing(app: App, where: str) -> None:
    made = approval_body()
    if where == "param value":
        made["action"]["params"] = {"to": "a\u0000@example.com"}
    elif where == "param key":
        made["action"]["params"] = {"t\u0000o": "a@example.com"}
    else:
        made[where] = "hello\u0000world"
    status, body = await app.api("POST", "/api/v1/approvals", json=made)
    assert status == 400, (status, body)
    assert "NUL" in body["error"]["message"], body
    _, listed = await app.api("GET", "/api/v1/approvals")
    assert listed["items"] == []
