"""An MCP server (stdio) whose one tool asks the user for input, in both protocol eras: under the legacy
handshake `mcp` sends `elicitation/create` mid-call; under 2026-07-28 it returns an InputRequiredResult
and reads the retry's answer (mcp.server.mcpserver's resolvers do either)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from mcp.server.mcpserver import AcceptedElicitation, Elicit, ElicitationResult, MCPServer, Resolve


class Deploy(BaseModel):
    environment: Literal["staging", "production"] = Field(description="Where to deploy")
    replicas: int = Field(ge=1, le=20)
    confirm: bool
    note: str = ""


server = MCPServer("deployer")


def ask() -> Elicit[Deploy]:
    return Elicit("Where should I deploy build 42?", Deploy)


@server.tool()
async def deploy(answer: Annotated[ElicitationResult[Deploy], Resolve(ask)]) -> str:
    """Deploy build 42, asking the user where."""
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        return f"deploying to {data.environment} x{data.replicas} confirm={data.confirm} note={data.note!r}"
    return f"not deploying: {answer.action}"


if __name__ == "__main__":
    server.run()
