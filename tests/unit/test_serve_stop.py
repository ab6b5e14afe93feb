"""What a stopping server says about environment threads: only calls really running count."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

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
