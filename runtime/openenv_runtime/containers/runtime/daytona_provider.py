"""The reference's ``DaytonaProvider`` (Daytona cloud sandboxes): not carried.

Daytona's service cannot be reached from where this project is built and tested, so a
provider for it could never be run here; the name imports and says what to use instead.
"""

from ...compat.unavailable import unavailable

DaytonaProvider = unavailable(
    "DaytonaProvider",
    "Daytona sandboxes are not supported; run the image with LocalDockerProvider or "
    "DockerSwarmProvider, or deploy it with `openenv deploy`.",
)

__all__ = ["DaytonaProvider"]
