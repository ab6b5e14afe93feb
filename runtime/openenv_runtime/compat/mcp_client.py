"""Alias of the reference's ``openenv.core.mcp_client``."""

from ..client.mcp import GenericMCPObservation, MCPClientBase, MCPToolClient

__all__ = ["GenericMCPObservation", "MCPClientBase", "MCPToolClient"]
