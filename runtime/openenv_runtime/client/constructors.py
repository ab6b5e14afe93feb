"""The constructors that start a server and hand back a client owning it.

``EnvClient.from_project``, ``from_docker_image``, ``from_env`` / ``from_hub`` and
``from_provider``: each starts a provider (:mod:`openenv_runtime.providers`), connects to its
first server, and gives the client the provider to stop when the client closes.
"""

from __future__ import annotations

import inspect
import os
import typing
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..providers.base import Provider
    from ..providers.interfaces import ContainerProvider


class Stoppable(Protocol):
    """What a client can own: something it stops when it closes."""

    def stop(self) -> None: ...


class ProviderConstructors:
    """Mixed into :class:`~openenv_runtime.EnvClient`; each constructor hands the client the
    provider it started as the constructor's ``provider`` (what ``close()`` stops)."""

    if TYPE_CHECKING:

        def __init__(self, base_url: str, **client_kwargs: Any) -> None: ...

    @classmethod
    def from_provider(cls, provider: Provider, **client_kwargs: Any) -> typing.Self:
        """Start ``provider`` and return a client of its first server that owns it.

        Closing the client (``close()``, leaving ``with`` / ``async with``) stops the
        provider; if starting fails or is interrupted, nothing is left running.
        """
        _check_client_options(cls, client_kwargs)  # before anything starts
        urls = provider.start()
        try:
            return cls(urls[0], provider=provider, **client_kwargs)
        except BaseException:
            provider.stop()
            raise

    @classmethod
    def from_project(
        cls, path: str | os.PathLike[str] = ".", workers: int = 1, **client_kwargs: Any
    ) -> typing.Self:
        """Serve the project in ``path`` (or a ``module:app`` path) locally, then connect.

        Usable as written in plain code (``env = MyEnv.from_project(".").sync()``), with
        ``await MyEnv.from_project(".")`` and with ``async with``; closing the client stops
        the server.
        """
        from ..providers.process import ProcessProvider

        return cls.from_provider(ProcessProvider(path, workers=workers), **client_kwargs)

    @classmethod
    def from_docker_image(
        cls,
        image: str,
        provider: Provider | ContainerProvider | None = None,
        *,
        env_vars: dict[str, str] | None = None,
        port: int | None = None,
        **client_kwargs: Any,
    ) -> typing.Self:
        """Run a container of ``image`` (needs ``openenv-runtime[docker]``), then connect.

        ``env_vars`` go to the container, ``port`` is its host port (default: a free one);
        ``provider`` replaces the default :class:`~openenv_runtime.providers.DockerProvider`
        (the reference's argument order), and may be one of the reference's container providers
        (``LocalDockerProvider()``, ``DockerSwarmProvider()``). With those, keywords the client
        does not take go to ``start_container`` (``replicas=4``, ``cpu_limit=...``), as in the
        reference; every argument is checked before anything starts. Closing the client
        removes the container.
        """
        if _is_container_provider(provider):
            container = typing.cast("ContainerProvider", provider)
            # only the options given, as the reference passes them (duck-typed providers
            # written for it may not take ``port`` at all)
            options, client_kwargs = _split_options(cls, client_kwargs)
            if port is not None:
                options["port"] = port
            if env_vars is not None:
                options["env_vars"] = env_vars
            _check_start_options(container, image, options)
            base_url = container.start_container(image, **options)
            try:
                container.wait_for_ready(base_url)
                return cls(base_url, provider=_ContainerStopper(container), **client_kwargs)
            except BaseException:
                container.stop_container()
                raise
        if provider is None:
            _check_client_options(cls, client_kwargs)
            from ..providers.docker import DockerProvider

            provider = DockerProvider(image, env=env_vars, host_port=port)
        return cls.from_provider(typing.cast("Provider", provider), **client_kwargs)

    @classmethod
    def from_env(
        cls,
        repo_id: str,
        use_docker: bool = False,
        *,
        token: str | None = None,
        env_vars: dict[str, str] | None = None,
        provider: Provider | ContainerProvider | None = None,
        **client_kwargs: Any,
    ) -> typing.Self:
        """Connect to the Hugging Face Space ``org/name`` once it runs (``HF_TOKEN`` if private),
        or serve a family target locally: ``from_env("gymnasium:CartPole-v1")``,
        ``from_env("reasoning_gym:leg_counting?size=50")`` (its library's extra installed).

        The Hub is ``HF_ENDPOINT`` (default https://huggingface.co). With ``use_docker=True``
        the Space's image ``registry.hf.space/org-name:latest`` runs locally instead (pulled
        when missing). ``provider`` replaces the default one (e.g. a ``SpaceProvider`` with
        its own ``url``); one of the reference's container providers runs the Space's image,
        with the keywords the client does not take passed to its ``start_container``
        (``from_hub("org/env", provider=DockerSwarmProvider(), replicas=4)``).
        """
        from ..providers.space import SpaceProvider, hf_token, space_image

        if ":" in repo_id and provider is None and not use_docker:  # FAMILY:NAME, not org/name
            from ..providers.process import ProcessProvider

            return cls.from_provider(ProcessProvider(repo_id, env=env_vars), **client_kwargs)
        if _is_container_provider(provider):  # the reference's: runs the Space's image
            image = space_image(repo_id)
            tag = client_kwargs.pop("tag", None)
            if tag is not None:
                image = f"{image.rpartition(':')[0]}:{tag}"
            return cls.from_docker_image(image, provider, env_vars=env_vars, **client_kwargs)
        if provider is not None:
            if isinstance(provider, SpaceProvider):
                token = hf_token(token)
            return cls.from_provider(
                typing.cast("Provider", provider), token=token, **client_kwargs
            )
        if use_docker:
            from ..providers.docker import DockerProvider

            docker = DockerProvider(space_image(repo_id), env=env_vars, pull=True)
            return cls.from_provider(docker, **client_kwargs)
        space = SpaceProvider(repo_id, token=token)
        return cls.from_provider(space, token=hf_token(token), **client_kwargs)

    from_hub = from_env


def _client_option_names(cls: type) -> set[str]:
    """The keywords a client class's constructor takes (the reference's spellings included)."""
    from .compat import REFERENCE_OPTION_NAMES

    names = {"mode", "provider", *REFERENCE_OPTION_NAMES}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        try:
            parameters = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        names.update(
            p.name
            for p in parameters
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        )
    names.discard("base_url")
    return names


def _split_options(cls: type, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(for start_container, for the client)``: what the client does not take is the provider's."""
    accepted = _client_option_names(cls)
    client = {k: v for k, v in kwargs.items() if k in accepted}
    return {k: v for k, v in kwargs.items() if k not in accepted}, client


def _check_client_options(cls: type, kwargs: dict[str, Any]) -> None:
    """``TypeError`` naming keywords the client does not take: raised before anything starts."""
    unknown = sorted(set(kwargs) - _client_option_names(cls))
    if unknown:
        raise TypeError(
            f"{cls.__name__} got unexpected keyword argument(s) {', '.join(unknown)} "
            "(nothing was started)"
        )


def _check_start_options(provider: Any, image: str, options: dict[str, Any]) -> None:
    """Check ``start_container``'s options before it runs: the provider's own check when it
    has one, else its signature (a ``TypeError`` naming the keyword, nothing started)."""
    check = getattr(provider, "check_options", None)
    if callable(check):
        check(options)
        return
    try:
        inspect.signature(provider.start_container).bind(image, **options)
    except TypeError as exc:
        raise TypeError(
            f"{type(provider).__name__}.start_container: {exc} (nothing was started)"
        ) from None
    except ValueError:  # no signature to read: let the provider judge
        pass


def _is_container_provider(provider: object) -> bool:
    """A reference-style provider: a ``ContainerProvider`` or any object shaped like one.

    The reference only calls ``start_container`` / ``wait_for_ready`` / ``stop_container``,
    so users' own providers (and test doubles) need not subclass anything; ours
    (:class:`~openenv_runtime.providers.base.Provider`) go through ``from_provider``.
    """
    from ..providers.base import Provider
    from ..providers.interfaces import ContainerProvider

    if isinstance(provider, ContainerProvider):
        return True
    return not isinstance(provider, Provider) and callable(
        getattr(provider, "start_container", None)
    )


class _ContainerStopper:
    """Lets a client own a container provider: ``stop()`` removes its container."""

    def __init__(self, provider: ContainerProvider) -> None:
        self.provider = provider

    def stop(self) -> None:
        self.provider.stop_container()
