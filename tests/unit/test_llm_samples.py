"""The llm package loads no HTTP client library when imported (the proxy's aiohttp included)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_llm_modules_import_no_http_client() -> None:
    code = (
        "import sys\n"
        "import openenv_runtime.llm.samples, openenv_runtime.llm.tokens, openenv_runtime.llm.tools\n"
        "from openenv_runtime.llm.samples import TraceEntry, assemble\n"
        "print(sorted(m for m in ('aiohttp', 'httpx', 'openai') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
