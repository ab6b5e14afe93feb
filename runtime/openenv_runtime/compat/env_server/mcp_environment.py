"""Alias of the reference's ``openenv.core.env_server.mcp_environment`` (needs ``openenv-runtime[mcp]``)."""

from ...blocking import run_to_completion
from ...mcp.environment import TOOL_CALL_TIMEOUT_S as MCP_TOOL_CALL_TIMEOUT
from ...mcp.environment import MCPEnvironment

run_async_safely = run_to_completion

__all__ = ["MCP_TOOL_CALL_TIMEOUT", "MCPEnvironment", "run_async_safely"]
