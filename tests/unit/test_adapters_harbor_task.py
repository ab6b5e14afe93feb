"""Reading a Harbor task folder (openenv_runtime.adapters.harbor_task): its fields, Harbor's
defaults, and one clear error for each way a folder can be wrong."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from openenv_runtime.adapters.harbor_task import (
    DEFAULT_TIMEOUT,
    MAX_TEXT_BYTES,
    folder_archive,
    read_task,
)
from openenv_runtime.errors import AdapterError
from tests.support.harbor_task import INSTRUCTION, make_task


def test_a_task_folder_reads_into_its_settings(tmp_path: Path) -> None:
    task = read_task(str(make_task(tmp_path / "hello")))
    assert task.name == "hello"
    assert task.instruction == INSTRUCTION
    assert (task.agent_timeout, task.verifier_timeout, task.build_timeout) == (90, 30, 120)
    assert task.verifier_env == {"EXPECTED": "hello", "STRICT": "true"}
    assert (task.cpus, task.memory_mb, task.allow_internet) == (1.0, 512, False)
    assert task.docker_image is None


def test_left_out_settings_take_harbors_defaults(tmp_path: Path) -> None:
    task = read_task(str(make_task(tmp_path / "t", toml='version = "1.0"\n')))
    assert task.agent_timeout == task.verifier_timeout == task.build_timeout == DEFAULT_TIMEOUT
    assert task.verifier_env == {} and task.allow_internet is True
    assert task.cpus is None and task.memory_mb is None


def test_a_relative_path_is_refused_with_the_absolute_one_to_give(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match=r"not an absolute path.*harbor:/"):
        read_task("some/task")


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="is not a folder"):
        read_task(str(tmp_path / "nowhere"))


def test_bad_toml_says_so(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t", toml="[verifier\ntimeout_sec = 1\n")
    with pytest.raises(AdapterError, match=r"task\.toml is not valid TOML"):
        read_task(str(root))


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ("[verifier]\ntimeout_sec = -1\n", "timeout_sec = -1 must be a positive number"),
        ("[agent]\ntimeout_sec = 'soon'\n", "must be a positive number"),
        ("agent = 3\n", "agent must be a table"),
        ("[environment]\nallow_internet = 'yes'\n", "must be true or false"),
        ("[verifier]\nenv = { 'A B' = 'x' }\n", "a variable name"),
        ("[environment]\ndocker_image = ''\n", "docker_image must be a name"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, toml: str, said: str) -> None:
    with pytest.raises(AdapterError, match=said):
        read_task(str(make_task(tmp_path / "t", toml=toml)))


@pytest.mark.parametrize(
    ("missing", "said"),
    [
        ("instruction.md", "has no instruction.md"),
        ("task.toml", "has no task.toml"),
        ("environment/Dockerfile", "has no environment/Dockerfile"),
        ("tests/test.sh", "has no tests/test.sh"),
    ],
)
def test_a_missing_file_is_named(tmp_path: Path, missing: str, said: str) -> None:
    root = make_task(tmp_path / "t")
    (root / missing).unlink()
    with pytest.raises(AdapterError, match=said):
        read_task(str(root))


def test_an_empty_instruction_is_refused(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "instruction.md").write_text("  \n")
    with pytest.raises(AdapterError, match=r"instruction\.md is empty"):
        read_task(str(root))


def test_a_named_image_needs_no_dockerfile(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t", toml="[environment]\ndocker_image = 'busybox:1'\n")
    (root / "environment" / "Dockerfile").unlink()
    assert read_task(str(root)).docker_image == "busybox:1"


def test_reads_are_bounded(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "instruction.md").write_bytes(b"x" * (MAX_TEXT_BYTES + 1))
    with pytest.raises(AdapterError, match=r"instruction\.md is over"):
        read_task(str(root))


def test_text_must_be_utf8(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "instruction.md").write_bytes(b"\xff\xfe bad")
    with pytest.raises(AdapterError, match="not UTF-8"):
        read_task(str(root))


def test_a_folder_archive_holds_the_folder_under_its_prefix(tmp_path: Path) -> None:
    root = make_task(tmp_path / "t")
    (root / "tests" / "data").mkdir()
    (root / "tests" / "data" / "expected.txt").write_text("hello\n")
    with tarfile.open(fileobj=io.BytesIO(folder_archive(root, "tests"))) as tar:
        assert sorted(tar.getnames()) == ["data", "data/expected.txt", "test.sh"]
        member = tar.extractfile("data/expected.txt")
        assert member is not None and member.read() == b"hello\n"
