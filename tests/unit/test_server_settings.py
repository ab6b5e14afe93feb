"""The runtime's one settings path: flag → env → openenv.yaml → create_app() → default."""

from pathlib import Path

import pytest

from openenv_runtime import EnvironmentContractError
from openenv_runtime.server.config.fields import FLAGS_VARIABLE, KEYS, ServerSettings
from openenv_runtime.server.config.settings import flags_variable, load_settings


def manifest(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "openenv.yaml"
    path.write_text("name: x\napp: x.server.app:app\n" + text, encoding="utf-8")
    return path


def test_defaults_are_written_once_and_reported_as_defaults(tmp_path: Path) -> None:
    resolved = load_settings(environ={}, manifest=tmp_path / "missing.yaml")
    assert resolved.values == ServerSettings()
    assert (resolved.values.max_concurrent_envs, resolved.values.session_timeout) == (100, 600.0)
    assert resolved.values.step_timeout is None and resolved.values.max_sessions_per_client is None
    assert {o.source for o in resolved.origins.values()} == {"default"}


def test_each_layer_in_order(tmp_path: Path) -> None:
    path = manifest(
        tmp_path, "port: 9000\nserver:\n  workers: 2\n  step_timeout: 5\n  session_timeout: 60\n"
    )
    resolved = load_settings(
        flags={"workers": 3},
        environ={"SESSION_TIMEOUT": "0", "ENABLE_WEB_INTERFACE": "off", "WARM_POOL": ""},
        manifest=path,
        code={"max_concurrent_envs": 4, "workers": 9, "step_timeout": 1},
    )
    values, origin = resolved.values, resolved.origin
    assert (values.workers, str(origin("workers"))) == (3, "--workers")
    assert (values.session_timeout, str(origin("session_timeout"))) == (None, "SESSION_TIMEOUT")
    assert (values.web_interface, origin("web_interface").source) == (False, "env")
    assert (values.port, str(origin("port"))) == (9000, "openenv.yaml: port")
    assert (values.step_timeout, origin("step_timeout").source) == (5, "openenv.yaml")
    assert (values.max_concurrent_envs, origin("max_concurrent_envs").source) == (4, "create_app()")
    assert (values.warm_pool, origin("warm_pool").source) == (0, "default")  # empty is unset


def test_a_key_the_file_does_not_set_is_not_reported_as_from_the_file(tmp_path: Path) -> None:
    resolved = load_settings(environ={}, manifest=manifest(tmp_path, "server:\n  workers: 2\n"))
    assert resolved.origin("workers").source == "openenv.yaml"
    assert resolved.origin("max_concurrent_envs").source == "default"
    assert resolved.origin("port").source == "default"


def test_flags_reach_workers_through_one_variable(tmp_path: Path) -> None:
    environ = {FLAGS_VARIABLE: flags_variable({"max_concurrent_envs": "7", "host": None})}
    resolved = load_settings(environ=environ, manifest=tmp_path / "none.yaml")
    assert (resolved.values.max_concurrent_envs, resolved.origin("max_concurrent_envs").source) == (
        7,
        "flag",
    )


def test_declared_settings_of_other_features_exist() -> None:
    for name, env, flag, yaml, default in (
        ("resume_grace", "SESSION_RESUME_GRACE", "--resume-grace", "server.resume_grace", 30),
        ("drain_timeout", "DRAIN_TIMEOUT", "--drain-timeout", "server.drain_timeout", 30),
        ("warm_pool", "WARM_POOL", "--warm-pool", "server.warm_pool", 0),
        ("step_timeout", "STEP_TIMEOUT", "--step-timeout", "server.step_timeout", None),
        ("checkpoint_dir", "CHECKPOINT_DIR", "--checkpoint-dir", "server.checkpoint_dir", None),
        (
            "max_checkpoint_bytes",
            "MAX_CHECKPOINT_BYTES",
            "--max-checkpoint-bytes",
            "server.max_checkpoint_bytes",
            16 << 20,
        ),
        ("checkpoint_ttl", "CHECKPOINT_TTL", "--checkpoint-ttl", "server.checkpoint_ttl", 3600),
    ):
        key = KEYS[name]
        assert (key.env, key.flag, key.yaml) == (env, flag, yaml)
        assert getattr(ServerSettings(), name) == default


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"MAX_CONCURRENT_ENVS": "lots"}, "MAX_CONCURRENT_ENVS"),
        ({"WORKERS": "0"}, "WORKERS"),
        ({"ENABLE_WEB_INTERFACE": "maybe"}, "ENABLE_WEB_INTERFACE"),
        ({"PORT": "70000"}, "PORT"),
    ],
)
def test_bad_values_name_their_source(environ: dict[str, str], named: str, tmp_path: Path) -> None:
    with pytest.raises(EnvironmentContractError, match=named):
        load_settings(environ=environ, manifest=tmp_path / "none.yaml")


def test_bad_manifest_value_names_the_file_key(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentContractError, match=r"openenv.yaml: server.max_concurrent_envs"):
        load_settings(
            environ={}, manifest=manifest(tmp_path, "server:\n  max_concurrent_envs: -1\n")
        )


def test_api_key_is_never_shown(tmp_path: Path) -> None:
    resolved = load_settings(environ={"OPENENV_API_KEY": "s3cret"}, manifest=tmp_path / "n.yaml")
    assert resolved.values.api_key_value == "s3cret"
    assert "s3cret" not in repr(resolved.values) and "s3cret" not in str(resolved.origins)


def test_booleans_parse_one_way() -> None:
    for raw, value in (("Yes", True), ("off", False), ("1", True), ("false", False)):
        assert load_settings(environ={"ENABLE_WEB_INTERFACE": raw}).values.web_interface is value


def test_the_inline_frame_path_is_on_unless_turned_off() -> None:
    assert load_settings(environ={}).values.inline_frames is True
    resolved = load_settings(environ={"OPENENV_INLINE_FRAMES": "0"})
    assert resolved.values.inline_frames is False
    assert str(resolved.origin("inline_frames")) == "OPENENV_INLINE_FRAMES"


def test_vector_sessions_hold_256_envs_unless_told_and_never_a_negative_number(
    tmp_path: Path,
) -> None:
    assert load_settings(environ={}).values.max_vector_envs == 256
    off = load_settings(environ={"OPENENV_MAX_VECTOR_ENVS": "0"})
    assert off.values.max_vector_envs == 0
    assert str(off.origin("max_vector_envs")) == "OPENENV_MAX_VECTOR_ENVS"
    yaml = manifest(tmp_path, "server:\n  max_vector_envs: 8\n")
    assert load_settings(environ={}, manifest=yaml).values.max_vector_envs == 8
    with pytest.raises(EnvironmentContractError):
        load_settings(environ={"OPENENV_MAX_VECTOR_ENVS": "-1"})


def test_checkpoint_settings_resolve_flag_then_env_then_manifest(tmp_path: Path) -> None:
    yaml = manifest(tmp_path, "server:\n  checkpoint_dir: /from/yaml\n  checkpoint_ttl: 0\n")
    resolved = load_settings(environ={}, manifest=yaml)
    assert resolved.values.checkpoint_dir == "/from/yaml"
    assert resolved.values.checkpoint_ttl is None  # 0: kept until deleted
    resolved = load_settings(environ={"CHECKPOINT_DIR": "/from/env"}, manifest=yaml)
    assert resolved.origin("checkpoint_dir").name == "CHECKPOINT_DIR"
    resolved = load_settings(
        flags={"checkpoint_dir": "/from/flag"}, environ={"CHECKPOINT_DIR": "/e"}, manifest=yaml
    )
    assert (resolved.values.checkpoint_dir, str(resolved.origin("checkpoint_dir"))) == (
        "/from/flag",
        "--checkpoint-dir",
    )


def test_checkpoint_and_code_mode_bounds_are_settings(tmp_path: Path) -> None:
    for name, env, flag, yaml, default in (
        ("max_checkpoints", "MAX_CHECKPOINTS", "--max-checkpoints", "server.max_checkpoints", 1024),
        (
            "max_checkpoint_total_bytes",
            "MAX_CHECKPOINT_TOTAL_BYTES",
            "--max-checkpoint-total-bytes",
            "server.max_checkpoint_total_bytes",
            None,
        ),
        (
            "max_checkpoints_per_client",
            "MAX_CHECKPOINTS_PER_CLIENT",
            "--max-checkpoints-per-client",
            "server.max_checkpoints_per_client",
            None,
        ),
        (
            "max_checkpoint_bytes_per_client",
            "MAX_CHECKPOINT_BYTES_PER_CLIENT",
            "--max-checkpoint-bytes-per-client",
            "server.max_checkpoint_bytes_per_client",
            None,
        ),
        ("checkpoint_key", "CHECKPOINT_KEY", None, None, None),
        (
            "code_wait_timeout",
            "CODE_WAIT_TIMEOUT",
            "--code-wait-timeout",
            "server.code_wait_timeout",
            30.0,
        ),
        (
            "code_slots_per_client",
            "CODE_SLOTS_PER_CLIENT",
            "--code-slots-per-client",
            "server.code_slots_per_client",
            None,
        ),
    ):
        key = KEYS[name]
        assert (key.env, key.flag, key.yaml) == (env, flag, yaml)
        assert getattr(ServerSettings(), name) == default
    values = load_settings(
        environ={"MAX_CHECKPOINTS": "10", "CODE_WAIT_TIMEOUT": "2"},
        manifest=manifest(tmp_path, "server:\n  max_checkpoint_bytes_per_client: 5000\n"),
    ).values
    assert (values.max_checkpoints, values.code_wait_timeout) == (10, 2.0)
    assert values.max_checkpoint_bytes_per_client == 5000


def test_per_client_shares_are_on_by_default_only_when_public() -> None:
    local, public = ServerSettings(), ServerSettings(api_key="k")
    assert local.checkpoint_total_bytes == 16 * local.max_checkpoint_bytes
    assert local.checkpoint_client_bounds({}) == (None, None)
    assert local.code_slots_for_client(4, {}) is None
    assert public.checkpoint_client_bounds({}) == (256, local.checkpoint_total_bytes // 4)
    assert local.checkpoint_client_bounds({"SPACE_ID": "u/s"}) == (256, 64 << 20)
    assert public.code_slots_for_client(4, {}) == 2
    explicit = ServerSettings(
        api_key="k", max_checkpoints_per_client=0, max_checkpoint_bytes_per_client=10,
        code_slots_per_client=0,
    )  # fmt: skip
    assert explicit.checkpoint_client_bounds({}) == (None, 10)
    assert explicit.code_slots_for_client(4, {}) is None


def test_the_checkpoint_key_is_never_shown(tmp_path: Path) -> None:
    resolved = load_settings(environ={"CHECKPOINT_KEY": "k3y-s3cret"}, manifest=tmp_path / "n")
    assert resolved.values.checkpoint_key is not None
    assert "k3y-s3cret" not in repr(resolved.values)
    resolved = load_settings(
        environ={"CHECKPOINT_KEY": "k3y-s3cret"},
        code={"checkpoint_key": "from-code"},
        manifest=tmp_path / "n",
    )
    assert "from-code" not in " ".join(resolved.overrides())
