"""An MCP server (stdio) whose one tool asks the user for input, in both protocol eras: under the legacy
handshake `mcp` sends `elicitation/create` mid-call; under 2026-07-28 it returns an InputRequiredResult
and reads the retry's answer (mcp.server.mcpserver's resolvers do either)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from mcp.server.mcpserver import AcceptedElicitation, Context, Elicit, ElicitationResult, MCPServer, Resolve


class Deploy(BaseModel):
    environment: Literal["staging", "production"] = Field(description="Where to deploy")
    replicas: int = Field(ge=1, le=20)
    confirm: bool
    note: str = ""
    regions: list[Literal["eu", "us", "ap"]] = Field(default_factory=list, max_length=2)  # a multi-select


server = MCPServer("deployer")


def ask() -> Elicit[Deploy]:
    return Elicit("Where should I deploy build 42?", Deploy)


@server.tool()
async def deploy(answer: Annotated[ElicitationResult[Deploy], Resolve(ask)], ctx: Context) -> str:
    """Deploy build 42, asking the user where."""
    era = f" (protocol {ctx.protocol_version})" if ERA[0] else ""
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        regions = f" regions={','.join(data.regions)}" if data.regions else ""
        return f"deploying to {data.environment} x{data.replicas} confirm={data.confirm} note={data.note!r}{regions}{era}"
    return f"not deploying: {answer.action}{era}"


ERA = [False]  # say which protocol version the call came in (--say-era)


async def _legacy_only() -> None:
    """Serve the handshake era only (`initialize`), refusing 2026-07-28's requests: a client must fall back."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


if __name__ == "__main__":
    import sys

    import anyio

    ERA[0] = "--say-era" in sys.argv
    if "--legacy-only" in sys.argv:
        anyio.run(_legacy_only)
    else:
        server.run()
