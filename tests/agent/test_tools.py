"""The tool registry (schemas from type hints, risk from hints) and the demo tools' guard rails."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

from bot.agent.demo_tools import demo_toolset
from bot.agent.questions import ask_human_tool, check_questions
from bot.agent.tools import DATE, DATE_TIME, EMAIL, Format, ToolContext, ToolError, Toolset, input_schema
from bot.domain.model import Risk


def test_schema_from_type_hints_and_docstring() -> None:
    def deploy(ctx: ToolContext, service: Annotated[str, "which service"], replicas: int = 2,
               env: Literal["staging", "prod"] = "staging", tags: list[str] | None = None,
               labels: dict[str, str] | None = None, dry_run: bool = False, ratio: float | None = None) -> str:
        """Deploy a service.

        Args:
            replicas: how many copies
                to run at once
        """
        return ""

    schema, context = input_schema(deploy)
    assert context == "ctx"
    assert schema == {
        "type": "object",
        "properties": {
            "service": {"type": "string", "description": "which service"},
            "replicas": {"type": "integer", "description": "how many copies to run at once", "default": 2},
            "env": {"enum": ["staging", "prod"], "default": "staging"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "dry_run": {"type": "boolean", "default": False},
            "ratio": {"type": "number"},
        },
        "required": ["service"],
        "additionalProperties": False,
    }


def test_risk_and_idempotency_follow_the_hints() -> None:
    tools = Toolset()

    @tools.tool(read_only=True)
    def look() -> str:
        """Look."""
        return "x"

    @tools.tool(destructive=True)
    def wipe() -> str:
        return "x"

    @tools.tool
    def poke(x: int) -> str:
        return "x"

    @tools.tool(risk=Risk.MEDIUM, idempotent=True, name="touch_it", description="Touch it.")
    def touch() -> str:
        return "x"

    got = {t.name: (t.risk, t.idempotent) for t in tools}
    assert got == {"look": (Risk.LOW, True), "wipe": (Risk.CRITICAL, False), "poke": (Risk.HIGH, False),
                   "touch_it": (Risk.MEDIUM, True)}
    assert tools.get("look").description == "Look." and tools.get("poke").description == "poke"  # type: ignore[union-attr]
    assert tools.get("poke").validate({"x": "1"}) == "invalid input: x: '1' is not of type 'integer'"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="already registered"):
        tools.tool(look)

    def bad(x: set[int]) -> None: ...

    with pytest.raises(TypeError, match="cannot describe"):
        input_schema(bad)


def test_demo_tools_are_tiered_and_declared_for_the_api() -> None:
    tools = demo_toolset()
    tiers = {t.name: (t.risk.value, t.idempotent) for t in tools}
    assert tiers == {
        "list_files": ("low", True), "read_file": ("low", True), "fetch_url": ("high", True),
        "write_file": ("high", True), "delete_file": ("critical", False), "send_email": ("high", False),
        "call_webhook": ("high", False),
    }
    for definition in tools.definitions():
        assert definition["input_schema"]["type"] == "object" and definition["description"]
    assert "ctx" not in tools.get("send_email").input_schema["properties"]  # type: ignore[union-attr]


def test_a_format_comes_from_annotated_and_the_demo_tools_declare_theirs() -> None:
    formats = {(t.name, name): prop.get("format") for t in demo_toolset()
               for name, prop in t.input_schema["properties"].items() if prop.get("format")}
    assert formats == {("send_email", "to"): "email", ("fetch_url", "url"): "uri", ("call_webhook", "url"): "uri"}
    tools = Toolset()

    @tools.tool
    def remind(when: Annotated[str, "when to remind", DATE_TIME], day: Annotated[str | None, DATE] = None) -> str:
        """Set a reminder."""
        return "ok"

    props = tools.get("remind").input_schema["properties"]  # type: ignore[union-attr]
    assert props["when"] == {"type": "string", "description": "when to remind", "format": "date-time"}
    assert props["day"] == {"type": "string", "format": "date"}

    def count(n: Annotated[int, EMAIL]) -> int:
        return n

    with pytest.raises(TypeError, match="str parameter"):
        input_schema(count)
    with pytest.raises(ValueError, match="not one of"):
        Format("phone")


async def test_workspace_paths_cannot_escape(tmp_path: Path) -> None:
    tools = demo_toolset()
    ctx = ToolContext(tmp_path / "ws", tmp_path / "out")
    read = tools.get("read_file")
    assert read is not None
    for path in ("../secret.txt", "/etc/passwd", "a/../../x"):
        with pytest.raises(ToolError, match="outside the workspace"):
            await read.run(ctx, {"path": path})
    write = tools.get("write_file")
    assert write is not None
    assert await write.run(ctx, {"path": "a/b.txt", "content": "hi"}) == "wrote 2 bytes to a/b.txt"
    preview = write.build_preview(ctx, {"path": "a/b.txt", "content": "hello"})
    assert preview is not None and preview.kind == "diff" and preview.data["before"] == "hi"


def test_ask_human_rules() -> None:
    ok: dict[str, Any] = {"questions": [{"question": "Which?", "options": [{"label": "a"}, {"label": "b"}]}]}
    assert ask_human_tool.validate(ok) is None
    too_many = {"questions": [ok["questions"][0]] * 5}
    assert "too long" in (ask_human_tool.validate(too_many) or "")
    one_option = {"questions": [{"question": "Which?", "options": [{"label": "a"}]}]}
    assert "too short" in (ask_human_tool.validate(one_option) or "")
    assert check_questions([{"question": "q", "options": [{"label": "A"}, {"label": "a "}]}]) is not None
