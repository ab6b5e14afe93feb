"""The runtime's package face: a trainer that only connects imports no server code."""

from __future__ import annotations

import json
import subprocess
import sys

import openenv_runtime

SERVER_STACK = ("fastapi", "starlette", "uvicorn", "openenv_runtime.server")


def loaded_after(statement: str) -> dict[str, bool]:
    probe = f"import sys, json; {statement}; print(json.dumps({{m: m in sys.modules for m in {list(SERVER_STACK)!r}}}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


def test_importing_the_client_loads_no_server() -> None:
    assert not any(loaded_after("import openenv_runtime.client").values())
    assert not any(
        loaded_after("from openenv_runtime import EnvClient, EnvPool, StepResult").values()
    )


def test_create_app_is_still_a_name_of_the_package() -> None:
    from openenv_runtime.server.app import create_app

    assert openenv_runtime.create_app is create_app
    assert loaded_after("from openenv_runtime import create_app")["fastapi"]
    assert "create_app" in openenv_runtime.__all__
