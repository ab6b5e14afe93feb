"""The app of the family target in ``ADAPTERS_BENCH_TARGET``, for ``adapters_exactness.py``."""

from __future__ import annotations

import os

from openenv_runtime.adapters.target import create_family_app

app = create_family_app(os.environ["ADAPTERS_BENCH_TARGET"])
