#!/usr/bin/env bash
# tests/integration/test_python310.py runs the runtime's tests under a real Python 3.10 when the
# machine has one ($OPENENV_PYTHON310, python3.10 on PATH, or pyenv's); say which, or say that
# those tests will skip (Debian 12 ships no 3.10). Fails only when OPENENV_PYTHON310 is set
# to something that is not a 3.10.
set -euo pipefail
is_310() { [ -n "$1" ] && [ -x "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; }
if [ -n "${OPENENV_PYTHON310:-}" ]; then
    if is_310 "$OPENENV_PYTHON310"; then
        echo "Python 3.10 for the runtime's tests: $OPENENV_PYTHON310"
        exit 0
    fi
    echo "OPENENV_PYTHON310=$OPENENV_PYTHON310 is not a Python 3.10 interpreter" >&2
    exit 1
fi
for candidate in "$(command -v python3.10 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10; do
    if is_310 "$candidate"; then
        echo "Python 3.10 for the runtime's tests: $candidate"
        exit 0
    fi
done
echo "No Python 3.10 interpreter: the runtime's 3.10 tests will skip (set OPENENV_PYTHON310 or install 3.10, e.g. with pyenv)"
