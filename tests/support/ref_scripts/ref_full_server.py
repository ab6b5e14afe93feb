"""Open one session with a reference client and report how it went (run with a reference python).

    python ref_full_server.py URL

Works with openenv-core 0.3.0 and openenv 0.10.0 (both ship ``openenv.core.GenericEnvClient``).
Prints one JSON document: ``{"ok": true, "observation": ...}`` when reset and a step worked,
else ``{"ok": false, "error": <exception type>, "message": <its text>}``.
"""

import json
import sys
from typing import Any, Dict

from openenv.core import GenericEnvClient


def main() -> None:
    out: Dict[str, Any] = {}
    try:
        with GenericEnvClient(base_url=sys.argv[1]).sync() as env:
            env.reset()
            result = env.step({"message": "hi"})
            out = {"ok": True, "observation": result.observation}
    except Exception as exc:  # what the reference raises is the point
        out = {"ok": False, "error": type(exc).__name__, "message": str(exc)[:500]}
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
