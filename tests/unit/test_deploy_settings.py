"""openenv_cli.deploy.settings: precedence (flag, env, openenv.yaml, default) and backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.deploy.backends import parse_backend, read_backends
from openenv_cli.deploy.settings import resolve_settings
from openenv_cli.errors import UsageError


def _project(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "openenv.yaml").write_text(
        "spec_version: 1\nname: my_env\napp: my_env.server.app:app\nport: 8100\n"
        "version: '0.3.0'\n" + extra
    )
    return tmp_path


def test_defaults(tmp_path: Path) -> None:
    settings = resolve_settings("kubernetes", _project(tmp_path), environ={})
    assert settings.name == "my-env"  # a valid DNS label
    assert settings.image == "my_env:0.3.0"  # what `openenv build` tags
    assert settings.port == 8100 and settings.front_port == 8080
    assert (settings.replicas, settings.workers, settings.sessions_per_worker) == (2, 1, 100)
    assert settings.session_timeout == 600 and settings.drain_timeout == 30
    assert settings.token is False and settings.access_log is False
    assert settings.capacity == 200


def test_manifest_then_env_then_flag(tmp_path: Path) -> None:
    project = _project(
        tmp_path,
        "server:\n  workers: 4\n  max_concurrent_envs: 500\n  session_timeout: 1200\n"
        "  drain_timeout: 60\n"
        "deploy:\n  replicas: 3\n  port: 9000\n  image: reg/my_env:1\n  balancing: session\n"
        "  token: true\n  access_log: true\n",
    )
    settings = resolve_settings("swarm", project, environ={})
    assert (settings.replicas, settings.front_port, settings.image) == (3, 9000, "reg/my_env:1")
    assert (settings.workers, settings.sessions_per_worker, settings.capacity) == (4, 500, 6000)
    assert settings.session_timeout == 1200 and settings.drain_timeout == 60
    assert settings.token is True and settings.access_log is True
    assert settings.balancing == "session"

    environ = {"OPENENV_DEPLOY_REPLICAS": "5", "OPENENV_DEPLOY_PORT": "9100", "WORKERS": "2"}
    settings = resolve_settings("swarm", project, environ=environ)
    assert (settings.replicas, settings.front_port, settings.workers) == (5, 9100, 2)

    settings = resolve_settings(
        "swarm", project, replicas=7, front_port=9200, image="x:1", token=False, environ=environ
    )
    assert (settings.replicas, settings.front_port, settings.image) == (7, 9200, "x:1")
    assert settings.token is False


def test_token_defaults_on_when_the_key_is_set(tmp_path: Path) -> None:
    settings = resolve_settings("kubernetes", _project(tmp_path), environ={"OPENENV_API_KEY": "k"})
    assert settings.token is True


def test_bad_env_value_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="OPENENV_DEPLOY_REPLICAS"):
        resolve_settings("slurm", _project(tmp_path), environ={"OPENENV_DEPLOY_REPLICAS": "many"})


def test_a_project_is_needed_except_for_envoy(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs a project"):
        resolve_settings("kubernetes", None, environ={})
    with pytest.raises(UsageError, match="--backend"):
        resolve_settings("envoy", None, environ={})
    settings = resolve_settings("envoy", None, backends=["10.0.0.1:80", "h:81"], environ={})
    assert settings.replicas == 2 and [str(b) for b in settings.backends] == ["10.0.0.1:80", "h:81"]


@pytest.mark.parametrize(
    "raw", ["nohost", ":80", "host:", "host:0", "host:70000", "ho st:80", "h{:80"]
)
def test_bad_backends(raw: str) -> None:
    with pytest.raises(UsageError):
        parse_backend(raw)


def test_backends_from_a_file(tmp_path: Path) -> None:
    listing = tmp_path / "servers.txt"
    listing.write_text("# comment\n10.0.0.1:8000\n\n[::1]:8001  # v6\n10.0.0.1:8000\n")
    backends = read_backends([str(listing), "h:9"])
    assert [(b.host, b.port) for b in backends] == [("10.0.0.1", 8000), ("::1", 8001), ("h", 9)]
    with pytest.raises(UsageError, match="not a readable file"):
        read_backends([str(tmp_path / "missing.txt")])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("deploy:\n  image: 'x:1\\n    command: [evil]'\n", "image"),
        ("deploy:\n  envoy_image: 'envoy; rm -rf /'\n", "envoy image"),
        ("deploy:\n  namespace: 'Kube System'\n", "namespace"),
        ("deploy:\n  cpu: '1\\nkind: Secret'\n", "cpu"),
        ("deploy:\n  memory: '$(reboot)'\n", "memory"),
    ],
)
def test_values_that_would_inject_into_the_files_are_refused(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        resolve_settings("kubernetes", _project(tmp_path, extra), environ={})


def test_a_name_that_is_no_dns_label_is_refused(tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("name: 'My Env\\n'\napp: my_env.server.app:app\n")
    with pytest.raises(UsageError, match="cannot name"):
        resolve_settings("slurm", tmp_path, environ={})


def test_backend_hosts_cannot_carry_yaml_or_shell() -> None:
    for raw in ("a}b:80", "$(x):80", "-flag:80", "a b:80", "h\nx:80"):
        with pytest.raises(UsageError):
            parse_backend(raw)


def test_unknown_balancing_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="least_request, session"):
        resolve_settings("swarm", _project(tmp_path), balancing="random", environ={})
