"""``python -m openenv_runtime.serve`` for a run under valgrind, with the step placement's limits scaled.

    valgrind --tool=callgrind python benchmarks/server/callgrind_serve.py APP [serve's options]

Under valgrind every instruction costs ~50× its usual time, so a plain ``step()`` of a few
microseconds would look expensive to the placement's timing and stay on the thread pool,
which is not what it does on a normal run. The time limits of
:class:`~openenv_runtime.server.running.step_placement.StepPlacement` are multiplied by
``OPENENV_CALLGRIND_SLOWDOWN`` (default 100) so that the same steps go inline as without
valgrind; nothing else changes. Used by ``hot_path_callgrind.py``.
"""

from __future__ import annotations

import os
import runpy
import sys

from openenv_runtime.server.running.step_placement import StepPlacement

SLOWDOWN = float(os.environ.get("OPENENV_CALLGRIND_SLOWDOWN", "100"))
StepPlacement.CHEAP_CPU *= SLOWDOWN
StepPlacement.INLINE_WALL_LIMIT *= SLOWDOWN
StepPlacement.INLINE_WALL_HARD *= SLOWDOWN

if __name__ == "__main__":
    sys.argv = ["openenv_runtime.serve", *sys.argv[1:]]
    runpy.run_module("openenv_runtime.serve", run_name="__main__", alter_sys=True)
