"""Fixtures shared by the whole suite, and its markers by path. Helpers live in ``tests/support/``."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.optional import missing_package_reason, reason, unavailable

if TYPE_CHECKING:
    import docker

# The one declaration of which test files each marker covers (the markers themselves are
# described in pyproject.toml): a folder ending in "/" covers every file in it. A test that
# alone in its file needs an engine carries its marker itself.
MARKED_PATHS: dict[str, tuple[str, ...]] = {
    "integration": ("integration/",),
    # Left out of a bare `pytest` (see pytest_collection_modifyitems): every engine's tests, and
    # files that build virtualenvs or images, train, or run minutes of load. `.ci/run` runs them.
    "heavy": (
        *(
            f"integration/{name}.py"
            for name in (
                "test_adapters_harbor",  # builds a task's image, runs its containers
                "test_adapters_verifiers",  # verifiers' own virtualenv (minutes to build)
                "test_auto_install",  # a throwaway virtualenv, pip installs from a git "Hub"
                "test_balancer_full",  # the reference's virtualenvs, Envoy, load
                "test_bench",
                "test_bench_action",
                "test_bench_study",
                "test_bench_token",
                "test_build",
                "test_build_secrets",
                "test_collect",  # hundreds of episodes through real servers and a model stand-in
                "test_compat",
                "test_containers_runtime",
                "test_deploy_envoy",
                "test_deploy_kubernetes",
                "test_deploy_monitoring",  # a real Prometheus and Envoy on the rendered files
                "test_deploy_slurm",
                "test_deploy_swarm",
                "test_docker_support",
                "test_docs_site",
                "test_docs_learn",  # trains a tiny model with TRL for a few steps
                "test_docs_train_with_trl",
                "test_import_family",  # each family's library imported in several processes
                "test_init_install",  # fresh virtualenvs
                "test_init_project",
                "test_metrics_prometheus",  # Debian's Prometheus scraping a two-worker server
                "test_providers_docker",
                "test_providers_ray",
                "test_providers_swarm",
                "test_push",
                "test_python310",
                "test_readme",  # the Quickstart in a fresh virtualenv
                "test_reference_envs",
                "test_reference_harness",
                "test_reference_openenv",
                "test_release",
                "test_runtime_bundle",  # pip installs the staged runtime into a fresh virtualenv
                "test_serve_settings",  # 8 servers (4 ways to set them x 1 or 2 workers), ~40 s
                "test_resume_envoy",
                "test_checkpoints_envoy",
                "test_trl_training",
                "test_validate_project",  # a server per project, many projects
                "test_web_ui",
            )
        ),
    ),
    "docker": (
        "integration/test_adapters_harbor.py",
        "integration/test_build.py",
        "integration/test_build_secrets.py",
        "integration/test_deploy_swarm.py",
        "integration/test_docker_support.py",
        "integration/test_providers_docker.py",
        "integration/test_providers_swarm.py",
    ),
    "hub": (
        "integration/test_discover.py",
        "integration/test_fork.py",
        "integration/test_hub_server.py",
        "integration/test_providers_space.py",
        "integration/test_push.py",
        "integration/test_push_secrets.py",
    ),
    "browser": ("integration/test_web_ui.py",),
    "compat": (
        "integration/test_compat.py",
        "integration/test_reference_envs.py",
        "integration/test_reference_harness.py",
        "integration/test_reference_openenv.py",
    ),
    "envoy": (
        "integration/test_deploy_envoy.py",
        "integration/test_deploy_slurm.py",
        "integration/test_deploy_swarm.py",
        "integration/test_resume_envoy.py",
    ),
    "release": ("integration/test_release.py",),
    "py310": ("integration/test_python310.py",),
    "ray": ("integration/test_providers_ray.py",),
    "swarm": ("integration/test_deploy_swarm.py", "integration/test_providers_swarm.py"),
    "slurm": ("integration/test_deploy_slurm.py",),
    "kubernetes": ("integration/test_deploy_kubernetes.py",),
}
# Packages that test files need in the processes they start (a CLI run, a build, the docs
# site), where a missing one cannot be caught as an import error: (module, extra) pairs. Such
# a test skips naming the extra, or fails when CI is set, before it starts anything.
NEEDED_PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "integration/test_bench_study.py": (("matplotlib", "bench"),),
    "integration/test_bench_token.py": (("matplotlib", "bench"),),
    "integration/test_collect.py": (
        ("pyarrow", "collect"),
        ("scipy", "collect"),
        ("jsf", "collect"),
        ("openai", "collect"),
    ),
    "integration/test_docs_site.py": (
        ("mkdocs", "docs"),
        ("material", "docs"),
        ("mkdocstrings", "docs"),
    ),
    "integration/test_llm_judge.py": (("openai", "ci"),),
    "integration/test_release.py": (("build", "ci"), ("twine", "ci"), ("pypiserver", "ci")),
}
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by the path of its file (see ``MARKED_PATHS``), then leave the heavy out.

    A bare ``pytest`` (the README's test command) runs what a 2-core machine finishes in
    minutes: tests marked ``heavy`` are deselected unless a marker expression (``-m heavy``,
    which ``.ci/run`` adds) or their own file or test id is given on the command line.
    """
    for item in items:
        try:
            where = item.path.relative_to(TESTS).as_posix()
        except ValueError:
            continue
        for marker, paths in MARKED_PATHS.items():
            if any(where == p or (p.endswith("/") and where.startswith(p)) for p in paths):
                item.add_marker(marker)
    if config.option.markexpr:
        return
    named = {Path(arg.partition("::")[0]).resolve() for arg in config.args if ".py" in arg}
    heavy = [i for i in items if i.get_closest_marker("heavy") and i.path.resolve() not in named]
    if heavy:
        kept = set(map(id, heavy))
        items[:] = [i for i in items if id(i) not in kept]
        config.hook.pytest_deselected(items=heavy)
        config.stash[_HEAVY_LEFT_OUT] = len(heavy)


_HEAVY_LEFT_OUT = pytest.StashKey[int]()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Say how many heavy tests a bare run left out, and how to run them."""
    left_out = config.stash.get(_HEAVY_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} engine and heavy tests deselected (Docker, Swarm, Slurm, Envoy, the "
            "browser, the reference virtualenvs, training): run them with `pytest -m heavy` "
            "(.ci/run does, after starting the engines)"
        )


class _OptionalImportsModule(pytest.Module):
    """A test module that is skipped, not an error, when it imports a missing optional package."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        try:
            self.obj  # noqa: B018  (imports the module)
        except self.CollectError as exc:
            reason = missing_package_reason(exc.__cause__)
            if reason is None:
                raise
            pytest.skip(f"{self.nodeid}: {reason}", allow_module_level=True)
        return super().collect()


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module:
    """Collect every test module through :class:`_OptionalImportsModule`."""
    return _OptionalImportsModule.from_parent(parent, path=module_path)


def _skip_when_optional_package_missing() -> Generator[None, object, object]:
    try:
        return (yield)
    except ModuleNotFoundError as exc:
        reason = missing_package_reason(exc)
        if reason is None:
            raise
        pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """Skip a test whose file needs a package that is missing (``NEEDED_PACKAGES``)."""
    try:
        where = item.path.relative_to(TESTS).as_posix()
    except ValueError:
        where = ""
    for module, extra in NEEDED_PACKAGES.get(where, ()):
        if importlib.util.find_spec(module) is None:
            unavailable(reason(module, extra))
    return (yield from _skip_when_optional_package_missing())


# Code under test that imports an optional package lazily: skip the test (fail it in CI).
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_skip_when_optional_package_missing)


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test ends with the process environment it started with.

    Commands run in-process (``CliRunner``) hand settings to their workers through environment
    variables (``openenv serve`` sets ``PYTHONPATH`` and ``OPENENV_SERVER_FLAGS``); left behind,
    they would change what every later ``create_app`` and subprocess of the session sees.
    """
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    """A connected Docker engine client for one test module (fails in CI, skips elsewhere, without an engine)."""
    from tests.support.docker_engine import docker_client

    engine = docker_client()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def base_image(client: docker.DockerClient) -> str:
    """The local python:3.11-slim stand-in, built once and cached."""
    from tests.support.base_image import ensure_base_image

    return ensure_base_image(client=client)
