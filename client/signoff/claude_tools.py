"""What a person sees for a Claude Code tool call: a summary, a preview and the tool's input schema.

Shared by the PreToolUse hook, the Agent SDK's `can_use_tool` and the MCP `permission_prompt` tool,
so a `Write` looks the same on a card whichever way it arrived. Previews show what will happen,
never only a description: `Write` is a diff against the file on disk, `Edit`/`MultiEdit` the diff
of the edit applied to it, `Bash` the command with its description and working directory,
`WebFetch` the URL, MCP tools their input as a table (flat) or JSON. Schemas make Slack's Edit form
typed (a multi-line box for `content`, a checkbox for `replace_all`).
"""

from __future__ import annotations

import difflib
import hashlib
import os
from typing import Any

DIFF_MAX_CHARS = 200_000  # the server takes previews up to 512 KB; a longer diff is cut with a note
FILE_MAX_BYTES = 2_000_000

_STR = {"type": "string"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "Write": {"type": "object", "properties": {"file_path": _STR, "content": _STR},
              "required": ["file_path", "content"]},
    "Edit": {"type": "object",
             "properties": {"file_path": _STR, "old_string": _STR, "new_string": _STR,
                            "replace_all": {"type": "boolean"}},
             "required": ["file_path", "old_string", "new_string"]},
    "MultiEdit": {"type": "object",
                  "properties": {"file_path": _STR, "edits": {"type": "array", "items": {"type": "object"}}},
                  "required": ["file_path", "edits"]},
    "Bash": {"type": "object",
             "properties": {"command": _STR, "description": _STR, "timeout": {"type": "integer", "minimum": 1},
                            "run_in_background": {"type": "boolean"}},
             "required": ["command"]},
    "WebFetch": {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}, "prompt": _STR},
                 "required": ["url"]},
}


def input_schema(tool: str, tool_input: dict[str, Any]) -> dict[str, Any] | None:
    """The tool's input schema when it is known and the input fits it; else None (the server infers one)."""
    schema = SCHEMAS.get(tool)
    if schema is None or any(key not in tool_input for key in schema.get("required", [])):
        return None
    return schema


def _full(path: str, cwd: str | None) -> str:
    return path if os.path.isabs(path) or not cwd else os.path.join(cwd, path)


def _read(path: str, cwd: str | None) -> str | None:
    """The file a call would change, as text; None when it is not a regular file of at most FILE_MAX_BYTES
    (the path is the model's: a FIFO or /dev/zero must not hold the hook past its timeout)."""
    from signoff._files import read_head  # here: a Bash call's card reads no file (the hook starts fast)

    data = read_head(_full(path, cwd), FILE_MAX_BYTES)
    if data is None:
        return None
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")  # as open() reads text


def _diff(path: str, before: str, after: str, *, new_file: bool, unread: bool = False) -> dict[str, Any]:
    # git's a/ and b/ before a relative path; an absolute one as it is (not a//tmp/x)
    old, new = (path, path) if path.startswith("/") else (f"a/{path}", f"b/{path}")
    source = "/dev/null" if new_file else old + (" (its current content is not shown)" if unread else "")
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), source, new)
    unified = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(unified) > DIFF_MAX_CHARS:
        cut = unified[:DIFF_MAX_CHARS]
        unified = cut[: cut.rfind("\n") + 1] + f"... diff cut at {DIFF_MAX_CHARS} characters\n"
    return {"kind": "diff", "path": path, "unified": unified or f"(no change to {path})\n"}


def _apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    for edit in edits:
        old, new = str(edit.get("old_string", "")), str(edit.get("new_string", ""))
        text = text.replace(old, new) if edit.get("replace_all") else text.replace(old, new, 1)
    return text


def preview(tool: str, tool_input: dict[str, Any], cwd: str | None = None, *,
            read_files: bool = True) -> dict[str, Any]:
    """The preview of one tool call, as the agent API takes it.

    `read_files`: diff against the file on this machine. Only where this runs beside the agent (the
    hook, the SDK callback, `signoff mcp` over stdio); never in the server, where the path an agent
    names is the server's file (its content would reach the card and the agent's API reads).
    """
    path = str(tool_input.get("file_path") or tool_input.get("notebook_path") or "")
    if tool == "Write" and path:
        before = _read(path, cwd) if read_files else None
        # A path that exists but is not shown (too big, a FIFO, a device) is not a new file.
        unread = not read_files or (before is None and os.path.lexists(_full(path, cwd)))
        return _diff(path, before or "", str(tool_input.get("content", "")), new_file=before is None and not unread,
                     unread=unread)
    if tool in ("Edit", "MultiEdit") and path:
        edits = tool_input.get("edits") if tool == "MultiEdit" else [tool_input]
        edits = [e for e in edits or [] if isinstance(e, dict)]
        before = _read(path, cwd) if read_files else None
        if before is None:  # not readable here: show the replacements themselves
            before = "".join(str(e.get("old_string", "")) + "\n" for e in edits)
            after = "".join(str(e.get("new_string", "")) + "\n" for e in edits)
            return _diff(path, before, after, new_file=False)
        return _diff(path, before, _apply_edits(before, edits), new_file=False)
    if tool == "Bash" and "command" in tool_input:
        lines = ["```", str(tool_input["command"]), "```"]
        if tool_input.get("description"):
            lines.append(str(tool_input["description"]))
        if cwd:
            lines.append(f"Working directory: `{cwd}`")
        if tool_input.get("run_in_background"):
            lines.append("Runs in the background.")
        return {"kind": "markdown", "text": "\n".join(lines)}
    if tool == "WebFetch" and "url" in tool_input:
        text = f"Fetch {tool_input['url']}"
        if tool_input.get("prompt"):
            text += f"\n\nThen: {tool_input['prompt']}"
        return {"kind": "markdown", "text": text}
    flat = all(not isinstance(v, (dict, list)) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
               for v in tool_input.values())
    if tool_input and flat:
        rows = [[key, ", ".join(value) if isinstance(value, list) else value] for key, value in tool_input.items()]
        return {"kind": "table", "columns": ["parameter", "value"], "rows": rows}
    return {"kind": "json", "value": tool_input}


def summary(tool: str, tool_input: dict[str, Any], cwd: str | None = None) -> str:
    """One line for the card's title."""
    path = str(tool_input.get("file_path") or "")
    if path and cwd and path.startswith(cwd.rstrip("/") + "/"):
        path = path[len(cwd.rstrip("/")) + 1 :]
    if tool == "Write" and path:
        return f"Claude Code wants to write {path}"
    if tool in ("Edit", "MultiEdit") and path:
        return f"Claude Code wants to edit {path}"
    if tool == "Bash" and tool_input.get("command"):
        command = " ".join(str(tool_input["command"]).split())
        return f"Claude Code wants to run: {command[:200]}"
    if tool == "WebFetch" and tool_input.get("url"):
        return f"Claude Code wants to fetch {str(tool_input['url'])[:300]}"
    if tool.startswith("mcp__"):
        _, server, name = (tool.split("__", 2) + ["", ""])[:3]
        return f"Claude Code wants to call {name or tool} (MCP server {server})"
    return f"Claude Code wants to use {tool}"


FILE_TOOLS = ("Write", "Edit", "MultiEdit")


def file_state(tool: str, tool_input: dict[str, Any], cwd: str | None = None) -> str | None:
    """What a file tool's preview is computed from: the file on disk, as `sha256:<hex>` of its bytes,
    `absent` when there is none, `stat:<size>:<mtime_ns>` for one too large (or not regular) to read
    within bounds. None for other tools, or when the path cannot even be looked at (nothing to bind)."""
    path = tool_input.get("file_path")
    if tool not in FILE_TOOLS or not isinstance(path, str) or not path:
        return None
    from signoff._files import read_head

    full = _full(path, cwd)
    data = read_head(full, FILE_MAX_BYTES)
    if data is not None:
        return "sha256:" + hashlib.sha256(data).hexdigest()
    try:
        found = os.stat(full)
    except FileNotFoundError:
        return "absent"
    except (OSError, ValueError):
        return None
    return f"stat:{found.st_size}:{found.st_mtime_ns}"
