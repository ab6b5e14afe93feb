"""The progress of a collect run: no ETA from the first few episodes to end."""

from __future__ import annotations

import time

from openenv_cli.collect.runner import ETA_AFTER, Progress


def test_no_eta_until_a_round_of_episodes_has_ended() -> None:
    progress = Progress(total=1000, concurrency=64, started=time.monotonic() - 1.4)
    progress.done = 1  # the first quick episode: 1/1.4 s would promise 1,400 s
    assert progress.eta_s is None
    progress.done = 63
    assert progress.eta_s is None
    progress.done = 64
    eta = progress.eta_s
    assert eta is not None and eta < 30


def test_a_small_run_gets_an_eta_once_a_few_ended() -> None:
    progress = Progress(total=500, concurrency=1, started=time.monotonic() - 2.0)
    progress.done = ETA_AFTER - 1
    assert progress.eta_s is None
    progress.done = ETA_AFTER
    assert progress.eta_s is not None


def test_a_resumed_run_counts_only_what_is_left() -> None:
    progress = Progress(total=20, skipped=15, concurrency=8, started=time.monotonic() - 1.0)
    progress.done = 4
    assert progress.eta_s is None  # 4 of the 5 left: fewer than a round
    progress.done = 5
    assert progress.eta_s == 0
