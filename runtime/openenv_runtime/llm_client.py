"""Alias of the reference's ``openenv.core.llm_client`` (``OpenAIClient`` needs ``openenv-runtime[llm]``)."""

from .llm import (
    AnthropicClient,
    LLMClient,
    LLMResponse,
    OpenAIClient,
    ToolCall,
    create_llm_client,
)

__all__ = [
    "AnthropicClient",
    "LLMClient",
    "LLMResponse",
    "OpenAIClient",
    "ToolCall",
    "create_llm_client",
]
