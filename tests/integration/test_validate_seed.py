"""``openenv validate``'s seed check against served environments: seeded, and ignoring its seed."""

from __future__ import annotations

import pytest

from openenv_cli.validation.results import Status
from openenv_cli.validation.seed import check_seeded_reset
from openenv_runtime.testing import running_server
from tests.fixtures.dice import SeedlessDiceEnvironment
from tests.fixtures.dice import make_app as dice_app
from tests.fixtures.walk import make_app as walk_app

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("app", [dice_app, walk_app], ids=["dice", "walk"])
def test_a_seeded_environment_passes(app: object) -> None:
    with running_server(app()) as url:  # type: ignore[operator]
        result = check_seeded_reset("smoke", url, {}, timeout=30, seed=11)
    assert result.status is Status.PASS, result.message
    assert result.name == "smoke.seed" and result.details == {"seed": 11, "steps": 3}


def test_an_environment_that_ignores_its_seed_is_reported() -> None:
    with running_server(dice_app(SeedlessDiceEnvironment)) as url:
        result = check_seeded_reset("smoke", url, {}, timeout=30, seed=11)
    assert result.status is Status.WARN
    assert "ignores its seed" in result.message and "observation.rolls" in result.message
    assert result.fix is not None and "random.Random(seed)" in result.fix


def test_an_unreachable_server_fails_the_check() -> None:
    result = check_seeded_reset("remote", "http://127.0.0.1:9", {}, timeout=2)
    assert result.status is Status.FAIL and "could not talk" in result.message
