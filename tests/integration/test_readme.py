"""The documentation's commands, run as written.

Every ```bash and ```python block of README.md, of each page in docs/ and of
runtime/README.md is either run here or listed in ``SKIPPED`` with the reason, so none is
silently left out (a new block fails ``test_every_block_is_accounted_for`` until it is
runnable here or listed).

The quickstart runs for real in a fresh virtualenv holding this checkout's CLI and runtime:
each shell line in order (``cd`` moves the working folder; ``openenv serve`` starts in the
background and is stopped at the end), and the Python blocks run against that served
environment. The "Writing an environment" example runs as a module.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.release import (
    REPO,
    background,
    free_port,
    fresh_venv,
    pip_env,
    run,
    wait_http,
)

pytestmark = pytest.mark.timeout(1200)

README = REPO / "README.md"
RUNTIME_README = REPO / "runtime" / "README.md"
# Every page whose code blocks are run here or listed in SKIPPED.
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md")), RUNTIME_README]

# Pages whose runnable blocks another test runs (the others there say why not in the page).
RUN_ELSEWHERE = {
    "migrating.md": "tests/unit/test_docs_migrating.py",
    "first-hour.md": "tests/unit/test_docs_migrating.py",
    "train-with-trl.md": "tests/integration/test_docs_train_with_trl.py",
    "env-reasoning-gym.md": "tests/integration/test_docs_adapters.py",
    "env-textarena.md": "tests/integration/test_docs_adapters.py",
    "learn.md": "tests/integration/test_docs_learn.py",
    "env-harbor.md": "tests/integration/test_adapters_harbor.py",
    "env-verifiers.md": "tests/integration/test_adapters_verifiers.py",
}

# First line of a block → why it is not run here. (A page may instead say why right above
# the block, in a `<!-- not run: REASON -->` line.)
SKIPPED = {
    'pip install -e ./runtime -e ".[dev]"': "the repository's own set-up and full test run: that is .ci/run itself",
    "openenv validate                    # manifest, files, pyproject, models, schemas, Dockerfile, a smoke episode": "its three lines need a project (run by the quickstart) and a Space on the Hub",
    "openenv serve --workers 8 --max-concurrent-envs 500    # 4,000 sessions on one machine": "minutes of load on 8 workers; the quickstart serves for real",
    "openenv build                      # my_env:0.1.0 and my_env:latest": "needs a Docker engine (tests/integration/test_build.py)",
    "hf auth login                                   # once, with a write token (or pass --token / set HF_TOKEN)": "needs the Hugging Face Hub and a token (tests/integration/test_push.py)",
    "openenv build -t registry.example.com/my_env:0.1.0 && docker push registry.example.com/my_env:0.1.0": "needs an image registry the cluster pulls from; tests/integration/test_deploy_swarm.py builds and deploys an image locally",
    "from openenv_runtime import EnvError, EnvPool": "a function a trainer calls with its policy and a Docker image; tests/integration/test_pool.py and test_providers_docker.py run the same EnvPool and DockerProvider calls against real servers and containers",
    "openenv bench --serve --requests-grid 32,128 --wait-grid 0.1 --reps 1     # the built-in environment": "needs the bench extra and a running server; tests/integration/test_bench.py and test_bench_action.py run these",
    # docs/collect-and-eval.md
    "openenv collect http://127.0.0.1:8000 --llm http://127.0.0.1:9000 --model my-model \\": "needs a model server; tests/integration/test_collect.py collects from a real server with a scripted policy",
    "from datasets import load_dataset": "reads the dataset the block above writes; test_collect.py loads a collected dataset with the datasets library",
    "openenv eval http://127.0.0.1:8000 --llm http://127.0.0.1:9000 --model my-model \\": "needs a model server; test_collect.py checks an eval report end to end",
    # docs/pool-and-checkpoints.md
    'async with EnvPool(MyEnv, urls=urls, size=64, autoreset="next_step") as pool:': "a fragment of a trainer's loop (MyEnv, urls, policy are the reader's); tests/integration/test_pool.py runs first-ready pools",
    "class MyEnvironment(Environment[MyAction, MyObservation, MyState]):": "a fragment (the models are the reader's); tests/integration/test_checkpoints.py serves environments with checkpoints",
    "async with MyEnv(base_url=url) as env:": "a fragment against the reader's server; tests/integration/test_checkpoints.py checkpoints, restores and forks for real",
    # docs/security.md
    "openenv push --include-secret certs/ca.pem --dry-run   # see what would go, with the ca.pem": "needs a project with that file; tests/integration/test_push_secrets.py runs push's secret rules",
    "openenv push --secret HF_TOKEN --dry-run": "needs a project; tests/integration/test_push_secrets.py and test_push.py run push with secrets",
}

QUICKSTART_FIRST_LINE = "openenv init my_env"
CLIENT_BLOCKS = ("from my_env import MyAction, MyEnv", "import asyncio")
ENVIRONMENT_BLOCK = "from uuid import uuid4"
MODULE_BLOCK = "python -m openenv_cli --help"
RUNTIME_BLOCKS = (
    "from uuid import uuid4\n\nfrom openenv_runtime import",
    "from openenv_runtime import GenericEnvClient",
)


@dataclass(frozen=True)
class Block:
    language: str
    lines: list[str]
    not_run: str = ""  # the reason in a `<!-- not run: ... -->` line right above the block

    @property
    def first(self) -> str:
        return self.lines[0].strip() if self.lines else ""

    @property
    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


def blocks(documents: list[Path] = DOCUMENTS) -> list[Block]:
    pattern = re.compile(
        r"(?:^<!-- not run: ([^>]+)-->\n)?^```(bash|python)\n(.*?)^```", re.S | re.M
    )
    return [
        Block(m.group(2), m.group(3).rstrip("\n").splitlines(), (m.group(1) or "").strip())
        for document in documents
        for m in pattern.finditer(document.read_text())
    ]


def _block(first: str, documents: list[Path] = DOCUMENTS) -> Block:
    return next(b for b in blocks(documents) if b.first.startswith(first))


def test_every_block_is_accounted_for() -> None:
    run_here = (QUICKSTART_FIRST_LINE, *CLIENT_BLOCKS, ENVIRONMENT_BLOCK, MODULE_BLOCK)
    runtime_blocks = blocks([RUNTIME_README])
    assert [b.source.startswith(RUNTIME_BLOCKS) for b in runtime_blocks] == [True, True]
    unaccounted = [
        b.first
        for b in blocks([README, *(d for d in DOCUMENTS[1:-1] if d.name not in RUN_ELSEWHERE)])
        if not b.not_run and b.first not in SKIPPED and not b.first.startswith(run_here)
    ]
    assert not unaccounted, (
        "Blocks of the README or docs/ neither run by tests/integration/test_readme.py nor listed in its "
        f"SKIPPED with a reason: {unaccounted}"
    )
    for first in SKIPPED:
        assert any(b.first == first for b in blocks()), (
            f"SKIPPED lists a block that is gone: {first}"
        )


def test_python_m_openenv_cli_block(venv: Path) -> None:
    out = run(["bash", "-c", _block(MODULE_BLOCK).source], env=_env(venv))
    assert "init" in out and "validate" in out


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with this checkout's runtime and CLI (what "Set up" installs)."""
    bin_dir = fresh_venv(tmp_path_factory.mktemp("readme") / "venv")
    run(
        [bin_dir / "pip", "install", "--quiet", REPO / "runtime", REPO],
        env=pip_env(),
        timeout=900,
    )
    return bin_dir


def _env(venv: Path) -> dict[str, str]:
    env = pip_env()
    env["PATH"] = f"{venv}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv.parent)
    return env


# The README serves on 8000; here a free port (through PORT, which `openenv serve` honours),
# so a busy 8000 on a shared machine cannot fail the test. The client blocks get the same.
PORT = free_port()


def _on_our_port(source: str) -> str:
    return source.replace("http://127.0.0.1:8000", f"http://127.0.0.1:{PORT}")


@pytest.fixture(scope="module")
def served(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The quickstart's shell lines, in order; yields while its `openenv serve` runs."""
    cwd = tmp_path_factory.mktemp("quickstart")
    env = _env(venv)
    env["PORT"] = str(PORT)
    with _quickstart(_block(QUICKSTART_FIRST_LINE), cwd, env) as project:
        yield project


def _command(line: str) -> str:
    return line.split("  #")[0].strip()  # the comment after two spaces is prose


@contextmanager
def _quickstart(block: Block, cwd: Path, env: dict[str, str]) -> Iterator[Path]:
    log = cwd / "serve.log"
    for line in block.lines:
        command = _command(line)
        words = shlex.split(command)
        if words[0] == "cd":
            cwd = cwd / words[1]
            continue
        if words[:2] == ["openenv", "serve"]:
            with background(["bash", "-c", command], cwd=cwd, env=env, log=log) as server:
                health = wait_http(f"http://127.0.0.1:{PORT}/health", timeout=60, process=server)
                assert json.loads(health)["status"] == "healthy"
                yield cwd
            return
        out = run(["bash", "-c", command], cwd=cwd, env=env, timeout=600)
        if words[0] == "pytest":
            assert " passed" in out and "failed" not in out
    raise AssertionError("the quickstart no longer ends with `openenv serve`")


def test_sync_client_block_prints_what_the_comment_says(venv: Path, served: Path) -> None:
    block = _block(CLIENT_BLOCKS[0])
    out = run([venv / "python", "-c", _on_our_port(block.source)], cwd=served, env=_env(venv))
    assert out.splitlines()[-1] == "Hello 0.5 False"


def test_async_client_block_runs_as_shown(venv: Path, served: Path) -> None:
    block = _block(CLIENT_BLOCKS[1])
    out = run([venv / "python", "-c", _on_our_port(block.source)], cwd=served, env=_env(venv))
    assert out.strip() == "Hello 0.5 False"


def test_writing_an_environment_block_runs(venv: Path, tmp_path: Path) -> None:
    block = _block(ENVIRONMENT_BLOCK)
    (tmp_path / "guess.py").write_text(block.source)
    probe = (
        "import guess\n"
        "from openenv_runtime import GenericEnvClient\n"
        "from openenv_runtime.testing import running_server\n"
        "with running_server(guess.app) as url, GenericEnvClient(base_url=url).sync() as env:\n"
        "    env.reset(seed=3)\n"
        "    result = env.step({'guess': 3})\n"
        "    print(result.reward, result.done)\n"
    )
    out = run([venv / "python", "-c", probe], cwd=tmp_path, env=_env(venv))
    assert out.splitlines()[-1] == "1.0 True"


def test_runtime_readme_quickstart_runs(tmp_path: Path) -> None:
    # the runtime's package page: its environment served here, its client block against it
    environment, client = blocks([RUNTIME_README])
    (tmp_path / "guess_rt.py").write_text(environment.source)
    probe = (
        "import sys\n"
        "import guess_rt\n"
        "from openenv_runtime.testing import running_server\n"
        "with running_server(guess_rt.app) as url:\n"
        f"    exec(compile({client.source!r}.replace('http://127.0.0.1:8000', url), 'b', 'exec'))\n"
    )
    out = run([sys.executable, "-c", probe], cwd=tmp_path, env=dict(os.environ))
    assert out.splitlines()[-1] == "1.0 True"
