"""Another name for ``openenv_runtime.testing.stub_llm`` (the stand-in model server)."""

from ..testing.stub_llm import (
    Policy,
    Reply,
    StubLLM,
    StubReply,
    StubTokenizer,
    echo_policy,
    token_logprob,
)

__all__ = [
    "Policy",
    "Reply",
    "StubLLM",
    "StubReply",
    "StubTokenizer",
    "echo_policy",
    "token_logprob",
]
