"""``RayProvider``: replicas as Ray actors, spread over the nodes of the trainer's Ray cluster.

Needs Ray: ``pip install 'openenv-runtime[ray]'``. Each actor reserves ``num_cpus`` and
runs one ``python -m openenv_runtime.serve`` server on a free port of its node (the
node's Python environment must have the environment's package, as for any Ray task);
the URLs use each node's IP address. If Ray is not initialised yet, ``ray.init()`` is
called (joining ``RAY_ADDRESS`` when set, else a local cluster) and shut down on stop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from .base import Provider, ProviderError, missing_extra


def ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise missing_extra("ray", "ray") from None
    return ray


class _Replica:
    """The body of each actor: one local server on its node."""

    def __init__(
        self, target: str, workers: int, env: dict[str, str], startup_timeout: float
    ) -> None:
        from .process import ProcessProvider

        self.provider = ProcessProvider(
            target, workers=workers, host="0.0.0.0", env=env, startup_timeout=startup_timeout
        )

    def start(self) -> str:
        ray = ray_module()
        port = self.provider.start()[0].rsplit(":", 1)[1]
        return f"http://{ray.util.get_node_ip_address()}:{port}"

    def stop(self) -> None:
        self.provider.stop()


class RayProvider(Provider):
    """Start ``replicas`` servers as Ray actors.

    Args:
        target: a project folder or ``module:app`` import path, importable on every node.
        replicas: actors (one server each).
        num_cpus: CPUs each actor reserves from Ray's scheduler.
        workers: worker processes per server.
        env: extra environment variables for the servers.
        spread: place actors on different nodes where possible (Ray's ``SPREAD`` strategy).
        startup_timeout: seconds allowed for every server to answer ``/health``.
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        *,
        replicas: int = 1,
        num_cpus: float = 1.0,
        workers: int = 1,
        env: Mapping[str, str] | None = None,
        spread: bool = True,
        startup_timeout: float = 120.0,
    ) -> None:
        super().__init__()
        if replicas < 1:
            raise ProviderError("replicas must be at least 1")
        self.target = os.fspath(target)
        self.replicas = replicas
        self.num_cpus = num_cpus
        self.workers = workers
        self.env = dict(env or {})
        self.spread = spread
        self.startup_timeout = startup_timeout
        self.actors: list[Any] = []
        self._initialised_ray = False

    def _launch(self) -> list[str]:
        ray = ray_module()
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, log_to_driver=False)
            self._initialised_ray = True
        from .process import resolve_target

        target = resolve_target(self.target)  # fail here, not in an actor, on a bad target
        actor_cls = ray.remote(_Replica)
        options: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.spread:
            options["scheduling_strategy"] = "SPREAD"
        env = {**self.env}
        if target.app_dir:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (target.app_dir, os.environ.get("PYTHONPATH", "")) if p
            )
        for _ in range(self.replicas):
            self.actors.append(
                actor_cls.options(**options).remote(
                    self.target, self.workers, env, self.startup_timeout
                )
            )
        try:
            return list(
                ray.get(
                    [actor.start.remote() for actor in self.actors],
                    timeout=self.startup_timeout + 30,
                )
            )
        except ray.exceptions.GetTimeoutError:
            raise ProviderError(
                f"the Ray cluster did not start {self.replicas} replicas within "
                f"{self.startup_timeout:g}s; does it have {self.replicas * self.num_cpus:g} free "
                "CPUs? (`ray status`)"
            ) from None
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, Exception) else exc
            raise ProviderError(f"a Ray replica failed to start: {cause}") from None

    def _teardown(self) -> None:
        if not self.actors and not self._initialised_ray:
            return
        ray = ray_module()
        if self.actors:
            with contextlib.suppress(Exception):
                ray.get([actor.stop.remote() for actor in self.actors], timeout=30)
            for actor in self.actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        self.actors = []
        if self._initialised_ray:
            self._initialised_ray = False
            ray.shutdown()
