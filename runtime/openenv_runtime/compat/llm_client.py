"""Alias of the reference's ``openenv.core.llm_client``: the same module as ``openenv_runtime.llm.client``.

It is that module object itself, so patching ``openenv_runtime.compat.llm_client.AsyncOpenAI``
reaches the clients (as code written for the reference expects).
"""

import sys

from ..llm import client

sys.modules[__name__] = client
