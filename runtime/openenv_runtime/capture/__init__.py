"""Token-faithful capture of model calls: ``CaptureProxy`` records them as ``TraceEntry``
(``openenv_runtime.llm.samples``, whose ``assemble`` turns a session's entries into training
samples: ``prompt_ids``, ``completion_ids``, ``env_mask``, ``logprobs``)."""

from .proxy import CaptureProxy

__all__ = ["CaptureProxy"]
