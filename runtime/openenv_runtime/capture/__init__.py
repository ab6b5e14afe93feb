"""Token-faithful capture of model calls: ``CaptureProxy`` records them, ``assemble`` turns a
session's ``TraceEntry`` list into training samples (``prompt_ids``, ``completion_ids``,
``env_mask``, ``logprobs``)."""

from .entries import Sample, TraceEntry, assemble
from .proxy import CaptureProxy

__all__ = ["CaptureProxy", "Sample", "TraceEntry", "assemble"]
