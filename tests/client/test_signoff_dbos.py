"""signoff.dbos says what is wrong before it asks anyone: a wait loop faster than a round a second, a
call from outside a workflow, a callback URL that is not one, a receiver without the secret. And the
keys and URLs it derives are stable (the same workflow and step: the same key, always)."""

from __future__ import annotations

import pytest

from signoff.dbos import KEY_MAX, approval, handle_webhook, request_key, serve_webhooks, with_workflow, workflow_of
from signoff.errors import SignoffError


@pytest.mark.parametrize(("options", "says"), [
    ({"poll_every": 0.1}, "poll_every must be at least 1 s"),
    ({"poll_every": 0}, "poll_every must be at least 1 s"),
    ({"poll_every": 60, "poll_max": 10}, "poll_max at least poll_every"),
    ({"timeout": 0}, "timeout must be more than 0"),
])
def test_a_wait_that_would_spin_or_end_at_once_is_refused(options: dict[str, float], says: str) -> None:
    with pytest.raises(SignoffError, match=says):
        approval("refund", {"order": "A-1"}, **options)


def test_approval_outside_a_workflow_says_where_it_belongs() -> None:
    with pytest.raises(SignoffError, match=r"must be called in a DBOS workflow \(a function decorated with"):
        approval("refund", {"order": "A-1"})


def test_the_key_is_the_workflow_and_step_and_fits_the_servers_limit() -> None:
    assert request_key("refund-A-1042", 1) == "dbos:refund-A-1042:1"
    long = request_key("w" * 400, 3)
    assert len(long) <= KEY_MAX and long == request_key("w" * 400, 3) != request_key("w" * 400, 4)


def test_the_callback_url_names_the_workflow_and_keeps_its_own_query() -> None:
    url = with_workflow("https://hooks.example.com/signoff?team=ops&dbos_workflow=old", "refund-A-1042")
    assert url == "https://hooks.example.com/signoff?team=ops&dbos_workflow=refund-A-1042"
    assert workflow_of(url) == "refund-A-1042" and workflow_of("https://x.example/hook") is None
    assert workflow_of(None) is None
    with pytest.raises(SignoffError, match="callback_url must be an http:// or https:// URL"):
        with_workflow("127.0.0.1:8090/hook", "w")


def test_a_receiver_without_the_secret_fails_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIGNOFF_WEBHOOK_SECRET", raising=False)
    with pytest.raises(SignoffError, match="set SIGNOFF_WEBHOOK_SECRET"):
        serve_webhooks(0)
    with pytest.raises(SignoffError, match="set SIGNOFF_WEBHOOK_SECRET"):
        handle_webhook(b"{}", {})


def test_an_unsigned_post_is_refused_before_dbos_is_touched() -> None:
    status, answer = handle_webhook(b'{"type": "approval.decided"}', {}, secret="s")
    assert status == 401 and "unsigned" in answer["error"]
