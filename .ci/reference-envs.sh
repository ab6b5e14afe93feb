#!/usr/bin/env bash
# Packages the reference environments of tests/integration/test_reference_envs.py need
# (the list, with what each is for: tests/support/reference-envs.txt). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -r tests/support/reference-envs.txt
