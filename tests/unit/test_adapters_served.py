"""``family_provider``: a process provider serving a family target, checked before it starts."""

from __future__ import annotations

import pytest

from openenv_runtime.adapters.served import APP_PATH, FAMILY_TARGET_VARIABLE, family_provider
from openenv_runtime.adapters.target import FAMILIES, Family
from openenv_runtime.errors import AdapterError


def test_the_provider_serves_the_family_app_with_the_target_in_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a family whose "library" is always installed: only the lookup is under test here
    monkeypatch.setitem(FAMILIES, "stdlib", Family("x.stdlib", "stdlib", "json"))
    provider = family_provider("stdlib:thing?seed=3", workers=2, env={"A": "1"})
    assert provider.target.app == APP_PATH
    assert provider.workers == 2
    assert provider.env == {"A": "1", FAMILY_TARGET_VARIABLE: "stdlib:thing?seed=3"}
    assert provider.processes == []  # nothing started yet


def test_a_missing_library_is_one_error_naming_the_extra_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(FAMILIES, "nolib", Family("x.nolib", "nolib-extra", "no_such_pkg_4f1"))
    with pytest.raises(AdapterError, match=r'pip install "openenv-runtime\[nolib-extra\]"'):
        family_provider("nolib:Thing-v0")
    with pytest.raises(AdapterError, match="not a family target"):
        family_provider("my_env.server.app:app")
