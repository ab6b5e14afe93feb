"""openenv_cli.image.secret_rules: which names are secrets, and which variables must be secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_cli.errors import UsageError
from openenv_cli.hub.space import space_variables
from openenv_cli.image.secret_rules import secret_pattern, secret_variable_name
from openenv_cli.image.selection import select_files
from openenv_cli.manifest_schema import Manifest

# Every name the second hostile pass uploaded, and the ones beside them.
DENIED_FILES = [
    "terraform.tfstate",
    "terraform.tfstate.backup",
    "infra/prod.tfvars",
    "infra/prod.auto.tfvars.json",
    ".terraform/providers/lock",
    "kubeconfig",
    "deploy/kubeconfig",
    "deploy/kubeconfig.yaml",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".s3cfg",
    ".boto",
    ".htpasswd",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".yarnrc.yml",
    "putty.ppk",
    "release.jks",
    "android.keystore",
    "client.p12",
    "client.pfx",
    "service-account.json",
    "gcp/service-account-prod.json",
    "secrets.yaml",
    "helm/secrets.yml",
    ".password-store/github.gpg",
    ".ipynb_checkpoints/notebook-checkpoint.ipynb",
    # backups and case variants
    ".env~",
    ".netrc.bak",
    ".git-credentials.old",
    ".ENV",
    ".Env",
    "ID_RSA",
    ".pgpass.orig",
    "#.env#",
    ".env.swp",
    "terraform.tfstate.1",
    ".AWS/credentials",
    # entries with an inner slash, at any depth
    "deep/.docker/config.json",
    "a/b/.config/gcloud/credentials.db",
    "home/.cache/huggingface/token",
    "x/.cargo/credentials",
    "x/.m2/settings.xml",
    "x/.config/gh/hosts.yml",
]

SHIPPED_FILES = [
    "server/app.py",
    "README.md",
    "server/Dockerfile",
    "docs/keys.md",
    "keyboard.py",
    "environment.py",
    "server/settings.py",
    "secrets_manager.py",
    "tfvars.md",
    "backup.py",
    "notes.old.txt",
    "service.json",
]


@pytest.mark.parametrize("relative", DENIED_FILES)
def test_every_listed_name_is_a_secret(relative: str) -> None:
    parts = relative.split("/")
    # Somewhere along the path (a folder or the file) a rule matches.
    hits = [
        secret_pattern("/".join(parts[: i + 1]), is_dir=i < len(parts) - 1)
        for i in range(len(parts))
    ]
    assert any(hits), relative


@pytest.mark.parametrize("relative", SHIPPED_FILES)
def test_ordinary_names_are_not_secrets(relative: str) -> None:
    assert secret_pattern(relative) is None


def test_the_listed_files_are_left_out_of_a_selection(tmp_path: Path) -> None:
    for relative in [*DENIED_FILES, *SHIPPED_FILES]:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("plain text\n")
    selection = select_files(tmp_path)
    assert sorted(selection.paths) == sorted(SHIPPED_FILES)
    kinds = {item.kind for item in selection.left_out}
    assert kinds == {"secret"}


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "GITHUB_TOKEN",
        "HFTOKEN",
        "OPENAI_API_KEY",
        "API_KEY",
        "APIKEY",
        "AWS_SECRET_ACCESS_KEY",
        "CLIENT_SECRET",
        "DB_PASSWORD",
        "MYSQL_PWD",
        "PGPASSWORD",
        "SERVICE_CREDENTIALS",
        "OPENENV_API_KEY",
        "hf_token",
        "SSH_PRIVATE_KEY",
    ],
)
def test_secret_variable_names(name: str) -> None:
    assert secret_variable_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "WORKERS",
        "MAX_CONCURRENT_ENVS",
        "SESSION_TIMEOUT",
        "ENABLE_WEB_INTERFACE",
        "LOG_LEVEL",
        "TOKENIZERS_PARALLELISM",
        "MODE",
        "KEYBOARD_LAYOUT",
        "MONKEY",
        "PATH",
    ],
)
def test_ordinary_variable_names(name: str) -> None:
    assert not secret_variable_name(name)


def _manifest(**push: object) -> Manifest:
    return Manifest.model_validate({"name": "my_env", "app": "x:app", "push": push})


def test_a_secret_looking_variable_is_refused_and_points_to_secret() -> None:
    with pytest.raises(UsageError) as info:
        space_variables(_manifest(), {"HF_TOKEN": "hf_value", "MODE": "x"}, no_interface=False)
    assert "HF_TOKEN" in info.value.message and "public" in info.value.message
    assert "hf_value" not in info.value.message + (info.value.hint or "")
    assert "--secret HF_TOKEN" in (info.value.hint or "")
    with pytest.raises(UsageError, match=r"push\.variables"):
        space_variables(_manifest(variables={"DB_PASSWORD": "p"}), {}, no_interface=False)
    assert space_variables(_manifest(), {"MODE": "x"}, no_interface=False)["MODE"] == "x"


def test_a_variable_whose_value_is_a_token_is_refused() -> None:
    token = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"
    with pytest.raises(UsageError) as info:
        space_variables(_manifest(), {"MODEL_ID": token}, no_interface=False)
    said = info.value.message + (info.value.hint or "")
    assert "Hugging Face Token" in said and "--secret MODEL_ID" in said and token not in said
