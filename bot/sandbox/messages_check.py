"""What the Messages API rejects (400 ``invalid_request_error``), checked before the scripted model answers.

Headers aside, the body is checked the way the real API checks it: known top-level fields, role
alternation, content-block shapes per role, tool definitions and ``tool_choice``, and the
``tool_use`` -> ``tool_result`` pairing rule. So a bug in an agent loop gets the same 4xx it would get
from Anthropic instead of silently "working" against a lenient stand-in.
"""

from __future__ import annotations

import re
from typing import Any


#: Top-level request fields the Messages API accepts. Anything else is a 400
#: ("Extra inputs are not permitted"), which catches typos such as ``max_token``.
_KNOWN_BODY_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "tools",
        "tool_choice",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "thinking",
        "service_tier",
        "container",
        "mcp_servers",
        "cache_control",
        "context_management",
        "output_config",
        "output_format",
        "inference_geo",
        "speed",
        "diagnostics",
    }
)

#: Content block types valid only in (or in both) roles.
_USER_BLOCK_TYPES = frozenset({"text", "image", "document", "tool_result", "search_result"})
_ASSISTANT_BLOCK_TYPES = frozenset(
    {"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use", "mcp_tool_use"}
)

_TOOL_USE_ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_TOOL_CHOICE_TYPES = frozenset({"auto", "any", "tool", "none"})


# --------------------------------------------------------------------------- validation


class Rejected(Exception):
    """Raised by validation helpers; becomes an error response."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message


def _invalid(message: str) -> Rejected:
    return Rejected(400, "invalid_request_error", message)


def _validate_text_block(block: dict[str, Any], where: str) -> None:
    if not isinstance(block.get("text"), str):
        raise _invalid(f"{where}.text: Input should be a valid string")
    if block["text"] == "":
        raise _invalid(f"{where}: text content blocks must be non-empty")


def _validate_tool_result(block: dict[str, Any], where: str) -> None:
    if not isinstance(block.get("tool_use_id"), str):
        raise _invalid(f"{where}.tool_use_id: Field required")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        raise _invalid(f"{where}.is_error: Input should be a valid boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _invalid(f"{where}.content: Input should be a valid string or list of content blocks")
    for j, inner in enumerate(content):
        inner_where = f"{where}.content.{j}"
        if not isinstance(inner, dict) or inner.get("type") not in {"text", "image", "document", "search_result"}:
            raise _invalid(
                f"{inner_where}: Input tag {inner.get('type') if isinstance(inner, dict) else inner!r} found "
                "using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'search_result'"
            )
        if inner["type"] == "text":
            _validate_text_block(inner, inner_where)


def _validate_block(block: Any, role: str, where: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _invalid(f"{where}: Input should be a valid content block object with a 'type'")
    kind = block["type"]
    allowed = _USER_BLOCK_TYPES if role == "user" else _ASSISTANT_BLOCK_TYPES
    if kind not in allowed and not (role == "assistant" and kind.endswith("_tool_result")):
        raise _invalid(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected "
            f"tags for a{'n' if role == 'assistant' else ''} {role} message: "
            + ", ".join(f"'{t}'" for t in sorted(allowed))
        )
    if kind == "text":
        _validate_text_block(block, where)
    elif kind == "tool_use":
        if not isinstance(block.get("id"), str) or not _TOOL_USE_ID_RE.match(block["id"]):
            raise _invalid(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
        if not isinstance(block.get("name"), str) or not block["name"]:
            raise _invalid(f"{where}.name: Field required")
        if not isinstance(block.get("input"), dict):
            raise _invalid(f"{where}.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        _validate_tool_result(block, where)


def _validate_tools(body: dict[str, Any]) -> set[str]:
    """Validate ``tools`` / ``tool_choice`` and return the declared tool names."""
    names: set[str] = set()
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _invalid("tools: Input should be a valid list")
        for i, tool in enumerate(tools):
            where = f"tools.{i}"
            if not isinstance(tool, dict):
                raise _invalid(f"{where}: Input should be a valid dictionary")
            name = tool.get("name")
            if not isinstance(name, str) or not _TOOL_NAME_RE.match(name):
                raise _invalid(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
            if name in names:
                raise _invalid("tools: Tool names must be unique.")
            names.add(name)
            if tool.get("type", "custom") != "custom":
                continue  # a server tool (web_search_..., bash_..., ...); shape not checked
            if "description" in tool and not isinstance(tool["description"], str):
                raise _invalid(f"{where}.custom.description: Input should be a valid string")
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                raise _invalid(f"{where}.custom.input_schema: Field required")
            if schema.get("type") != "object":
                raise _invalid(f"{where}.custom.input_schema.type: Input should be 'object'")
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in _TOOL_CHOICE_TYPES:
            raise _invalid(
                "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"
            )
        if choice["type"] != "none" and tools is None:
            raise _invalid("tool_choice may only be specified while providing tools.")
        if choice["type"] == "tool" and choice.get("name") not in names:
            raise _invalid(f"Tool '{choice.get('name')}' not found in provided tools")
    return names


def validate_body(body: dict[str, Any]) -> None:
    """Raise :class:`Rejected` for anything the real Messages API would reject."""
    extra = sorted(set(body) - _KNOWN_BODY_FIELDS)
    if extra:
        raise _invalid(f"{extra[0]}: Extra inputs are not permitted")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if "max_tokens" not in body:
        raise _invalid("max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise _invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        raise _invalid("max_tokens: Input should be greater than or equal to 1")
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise _invalid("system: Input should be a valid string or list of text blocks")
        for i, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise _invalid(f"system.{i}: Input tag does not match the expected tag: 'text'")
            _validate_text_block(block, f"system.{i}")
    if body.get("stream"):
        raise Rejected(500, "api_error", "FakeAnthropic: streaming (stream=true) is not supported by this fake")
    tools_declared = "tools" in body and body["tools"] is not None
    _validate_tools(body)

    messages = body.get("messages")
    if "messages" not in body:
        raise _invalid("messages: Field required")
    if not isinstance(messages, list):
        raise _invalid("messages: Input should be a valid list")
    if not messages:
        raise _invalid("messages: at least one message is required")

    uses_tools = False
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict):
            raise _invalid(f"{where}: Input should be a valid dictionary")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise _invalid(f"{where}.role: Input should be 'user' or 'assistant'")
        expected = "user" if i % 2 == 0 else "assistant"
        if role != expected:
            if i == 0:
                raise _invalid("messages: first message must use the \"user\" role")
            raise _invalid("messages: roles must alternate between \"user\" and \"assistant\", but found multiple "
                           f"\"{role}\" roles in a row")
        if "content" not in msg:
            raise _invalid(f"{where}.content: Field required")
        extra_keys = sorted(set(msg) - {"role", "content"})
        if extra_keys:
            raise _invalid(f"{where}.{extra_keys[0]}: Extra inputs are not permitted")
        content = msg["content"]
        is_final_assistant = role == "assistant" and i == len(messages) - 1
        if isinstance(content, str):
            if not content and not is_final_assistant:
                raise _invalid(f"{where}: all messages must have non-empty content except for the optional "
                               "final assistant message")
            if is_final_assistant and content != content.rstrip():
                raise _invalid("final assistant content cannot end with trailing whitespace")
            continue
        if not isinstance(content, list):
            raise _invalid(f"{where}.content: Input should be a valid string or list of content blocks")
        if not content and not is_final_assistant:
            raise _invalid(f"{where}: all messages must have non-empty content except for the optional "
                           "final assistant message")
        for j, block in enumerate(content):
            _validate_block(block, role, f"{where}.content.{j}")
            if block["type"] in ("tool_use", "tool_result"):
                uses_tools = True
        if is_final_assistant and content and content[-1]["type"] == "text":
            if content[-1]["text"] != content[-1]["text"].rstrip():
                raise _invalid("final assistant content cannot end with trailing whitespace")

    if uses_tools and not tools_declared:
        raise _invalid("Requests which include `tool_use` or `tool_result` blocks must define tools.")
    _validate_tool_pairing(messages)


def _validate_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Enforce: every assistant ``tool_use`` is answered by a leading ``tool_result`` in the next message."""
    for i, msg in enumerate(messages):
        content = msg["content"]
        blocks = content if isinstance(content, list) else []
        if msg["role"] == "assistant":
            ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
            if len(ids) != len(set(ids)):
                raise _invalid(f"messages.{i}.content: `tool_use` ids must be unique")
            if not ids:
                continue
            following = messages[i + 1]["content"] if i + 1 < len(messages) else []
            following_blocks = following if isinstance(following, list) else []
            leading: list[str] = []
            for block in following_blocks:
                if block["type"] != "tool_result":
                    break
                leading.append(block["tool_use_id"])
            missing = [tid for tid in ids if tid not in leading]
            if missing:
                raise _invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                    "in the next message."
                )
        else:
            results = [(j, b["tool_use_id"]) for j, b in enumerate(blocks) if b["type"] == "tool_result"]
            if not results:
                continue
            previous = messages[i - 1]["content"] if i > 0 else []
            known = {b["id"] for b in previous if b["type"] == "tool_use"} if isinstance(previous, list) else set()
            seen: set[str] = set()
            for j, tid in results:
                if tid not in known:
                    raise _invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. "
                        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    )
                if tid in seen:
                    raise _invalid(f"messages.{i}.content.{j}: each `tool_use` id must have exactly one "
                                   f"`tool_result` block; found duplicates for {tid}")
                seen.add(tid)
            # tool_result blocks must all precede any other content
            first_other = next((j for j, b in enumerate(blocks) if b["type"] != "tool_result"), len(blocks))
            if any(j > first_other for j, _ in results):
                raise _invalid(
                    f"messages.{i}: `tool_result` blocks must come before any other content in the message"
                )


