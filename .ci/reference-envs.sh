#!/usr/bin/env bash
# Packages the reference environments of tests/integration/test_reference_envs.py need
# (chess_env: python-chess + moonfish; coding_env: smolagents). Idempotent.
set -euo pipefail
python3 -m pip install --quiet --disable-pip-version-check chess moonfish smolagents
