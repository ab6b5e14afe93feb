"""What a stopping server says about environment threads: only calls really running count."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime.serve import busy_environment_threads


def test_idle_pool_threads_are_not_counted_as_running_a_step() -> None:
    release = threading.Event()
    started = threading.Event()

    def hang() -> None:
        started.set()
        release.wait(30)

    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="openenv-env")
    session = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openenv-session")
    try:
        # three quick calls leave idle threads behind; one call hangs
        for future in [pool.submit(lambda: None) for _ in range(3)]:
            future.result()
        session.submit(lambda: None).result()
        hung = pool.submit(hang)
        assert started.wait(10)
        busy = busy_environment_threads()
        assert len(busy) == 1
        assert busy[0].name.startswith("openenv-env")
        release.set()
        hung.result(10)
        assert busy_environment_threads() == []
    finally:
        release.set()
        pool.shutdown(wait=True)
        session.shutdown(wait=True)


def test_reload_says_what_it_watches_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn
    import uvicorn.config

    import openenv_runtime.serve as serve
    from openenv_runtime.server.config.settings import load_settings

    def run(app: str, **options: Any) -> None:  # what uvicorn.run does first
        uvicorn.Config(app, reload=True, reload_dirs=options.get("reload_dirs"))

    said: list[str] = []
    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.setattr(uvicorn.config.logger, "info", lambda msg, *a, **k: said.append(msg % a))
    launch = serve.Launch("x:app", reload=True, reload_dirs=(str(tmp_path),))
    serve.run_server(launch, load_settings(environ={}).values)
    assert sum("Will watch" in line for line in said) == 1
