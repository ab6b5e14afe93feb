"""Model calls: clients of chat-completion endpoints and what their answers carry.

* :mod:`.client`: ``OpenAIClient`` / ``AnthropicClient`` (``LLMClient``), their replies
  (``LLMResponse``, ``ToolCall``) and ``create_llm_client``;
* :mod:`.tokens`: the token ids and log-probabilities a server sampled, read from its answer
  (``MissingTokenIdsError`` when it reported none);
* :mod:`.completions`: a non-streamed answer's bytes decoded straight into those tokens, its
  message and finish reason (msgspec; the capture proxy's read-back);
* :mod:`.tools`: MCP tool listings and chat messages in each provider's format;
* :mod:`.samples`: recorded calls (``TraceEntry``) assembled into training samples.

Nothing is imported here, so a module of this package loads only what it needs (no HTTP
client library at import time).
"""
