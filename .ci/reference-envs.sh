#!/usr/bin/env bash
# Packages the reference environments of tests/integration/test_reference_envs.py need
# (chess_env: python-chess + moonfish; coding_env and repl_env: smolagents; repl_env: gradio;
# snake_env: marlenv on gym 0.24.1; reasoning_gym_env: reasoning-gym). Idempotent.
set -euo pipefail
python3 -m pip install --quiet --disable-pip-version-check \
    chess moonfish smolagents gradio marlenv "gym==0.24.1" reasoning-gym Pillow
