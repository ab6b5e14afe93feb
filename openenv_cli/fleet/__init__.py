"""``openenv top``: what every replica of a fleet is doing, read from its ``/health`` and
``/metrics``.

:mod:`~openenv_cli.fleet.snapshot` turns one scrape into numbers and two scrapes into rates
and latency quantiles (no network); :mod:`~openenv_cli.fleet.scrape` fetches the replicas,
bounded in time and size, all at once.
"""
