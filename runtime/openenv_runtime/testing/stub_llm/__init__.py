"""A stand-in OpenAI-compatible model server for tests and examples (see ``server``)."""

from .server import Policy, Reply, StubLLM, StubReply, echo_policy
from .tokenizer import StubTokenizer, token_logprob

__all__ = [
    "Policy",
    "Reply",
    "StubLLM",
    "StubReply",
    "StubTokenizer",
    "echo_policy",
    "token_logprob",
]
