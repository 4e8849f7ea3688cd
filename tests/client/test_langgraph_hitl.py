"""Signoff decisions to LangChain HumanInTheLoopMiddleware decisions (pure; the integration tests run them for real)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from signoff.errors import SignoffError
from signoff.langgraph_hitl import actions_of, kind_of, resume_value, to_langchain
from signoff.langgraph_keys import KEY_MAX, interrupt_key

ARGS = {"to": "a@example.com", "subject": "Hi"}


def ended(outcome: str, params: dict[str, Any] | None = None, *, via: str = "button",
          comment: str | None = None) -> dict[str, Any]:
    return {"id": "apr_1", "status": outcome,
            "decision": {"outcome": outcome, "params": params or {}, "changes": [], "comment": comment, "via": via}}


def action(*allowed: str) -> dict[str, Any]:
    return {"name": "send_email", "args": ARGS, "allowed": list(allowed)}


def test_each_outcome_maps_to_the_decision_langchain_documents() -> None:
    every = action("approve", "edit", "reject", "respond")
    assert to_langchain(every, ended("approved", ARGS)) == {"type": "approve"}
    edited = {**ARGS, "subject": "Hello"}
    assert to_langchain(every, ended("approved", edited, via="modal")) == {
        "type": "edit", "edited_action": {"name": "send_email", "args": edited}}
    assert to_langchain(every, ended("rejected", comment="not today")) == {"type": "reject", "message": "not today"}
    assert to_langchain(every, ended("rejected")) == {"type": "reject"}
    assert to_langchain(every, ended("rejected", via="reply", comment="Done by hand.")) == {
        "type": "respond", "message": "Done by hand."}


def test_nobody_deciding_fails_closed() -> None:
    assert to_langchain(action("approve", "reject"), ended("expired")) == {
        "type": "reject", "message": "Not approved: nobody approved it in Slack (the request expired)."}
    assert to_langchain(action("approve", "respond"), ended("cancelled"))["type"] == "respond"
    with pytest.raises(SignoffError, match="neither reject nor respond"):
        to_langchain(action("approve"), ended("expired"))
    with pytest.raises(SignoffError, match="still pending"):
        to_langchain(action("approve"), {"id": "apr_1", "status": "pending"})


def test_an_unchanged_approval_where_only_edit_is_allowed_is_an_edit() -> None:
    assert to_langchain(action("edit", "reject"), ended("approved", ARGS))["type"] == "edit"


def test_batched_and_per_call_interrupts() -> None:
    batched = SimpleNamespace(id="i1", response_schema=None, value={
        "action_requests": [{"name": "send_email", "args": ARGS, "description": "d"}],
        "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "reject"]}]})
    assert kind_of(batched.value) == "batched"
    assert resume_value(batched, [ended("approved", ARGS)]) == {"decisions": [{"type": "approve"}]}
    schema = {"$defs": {"EditedAction": {"properties": {"args": {"$ref": "#/$defs/send_email"}}},
                        "send_email": {"type": "object", "properties": {"to": {"type": "string"}}}},
              "discriminator": {"mapping": {"approve": "#/x", "edit": "#/y"}, "propertyName": "type"}}
    per_call = SimpleNamespace(id="i2", response_schema=schema, value={
        "type": "tool_approval", "tool_call_id": "c1", "name": "send_email", "args": ARGS, "description": "d"})
    [found] = actions_of(per_call)
    assert found["allowed"] == ["approve", "edit"]
    assert found["args_schema"] == {"type": "object", "properties": {"to": {"type": "string"}}}
    assert resume_value(per_call, [ended("approved", ARGS)]) == {"type": "approve"}
    assert kind_of({"question": "not ours"}) is None


def test_keys_stay_within_the_servers_limit() -> None:
    assert interrupt_key("approval", "t", "node:1", 0) == "lg:approval:t:node:1:0"
    long = interrupt_key("approval", "t" * 300, "node:1", 0)
    assert len(long) <= KEY_MAX and long != interrupt_key("approval", "t" * 300, "node:1", 1)


def test_one_batch_request_answers_every_action_of_the_interrupt_in_order() -> None:
    edited = {**ARGS, "subject": "Hello"}
    value = {"action_requests": [{"name": "send_email", "args": ARGS}, {"name": "send_email", "args": ARGS},
                                 {"name": "delete_file", "args": {"path": "/tmp/x"}},
                                 {"name": "delete_file", "args": {"path": "/tmp/y"}}],
             "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]},
                                {"action_name": "delete_file", "allowed_decisions": ["approve", "reject", "respond"]}]}
    interrupt = SimpleNamespace(id="i1", response_schema=None, value=value)

    def item(name: str, outcome: str | None, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return {"name": name, "outcome": outcome, "params": params, "changes": [], **kw}

    body = {"id": "apr_1", "status": "expired", "decision": {"outcome": "expired", "params": {}, "items": [
        item("send_email", "approved", ARGS), item("send_email", "approved", edited, via="modal"),
        item("delete_file", "rejected", {"path": "/tmp/x"}, via="reply", comment="Done by hand."),
        item("delete_file", None, {"path": "/tmp/y"})]}}
    assert resume_value(interrupt, [body]) == {"decisions": [
        {"type": "approve"},
        {"type": "edit", "edited_action": {"name": "send_email", "args": edited}},
        {"type": "respond", "message": "Done by hand."},
        {"type": "reject", "message": "Not approved: nobody approved it in Slack (the request expired)."}]}
    short = {**body, "decision": {**body["decision"], "items": body["decision"]["items"][:3]}}
    with pytest.raises(SignoffError, match="holds 3 actions"):
        resume_value(interrupt, [short])
