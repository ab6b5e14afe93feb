"""The reference's ``openenv.core.containers.runtime.daytona_provider``: :mod:`openenv_runtime.providers.daytona`."""

from ....providers.daytona import DaytonaProvider

__all__ = ["DaytonaProvider"]
