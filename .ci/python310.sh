#!/usr/bin/env bash
# tests/integration/test_python310.py runs the runtime's tests under a real Python 3.10. The
# machine image carries one through pyenv; say where it is, or fail early with the reason.
set -euo pipefail
for candidate in "${OPENENV_PYTHON310:-}" "$(command -v python3.10 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then
        echo "Python 3.10 for the runtime's tests: $candidate"
        exit 0
    fi
done
echo "No Python 3.10 interpreter: set OPENENV_PYTHON310 or install 3.10 with pyenv" >&2
exit 1
