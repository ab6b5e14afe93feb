"""openenv.yaml files written for (or read by) the reference OpenEnv load without warnings."""

from __future__ import annotations

from pathlib import Path

import yaml

from openenv_cli.manifest import load_manifest
from openenv_cli.scaffold import render_project

REFERENCE_MANIFEST = """spec_version: 1
name: demo_env
version: 0.1.0
type: space
runtime: fastapi
app: demo_env.server.app:app
port: 8000
validation:
  reward:
    range: [0.0, 1.0]
    oracle_tolerance: 0.0
  resources:
    cpu: 1.0
    memory_mb: 1024
  capabilities:
    verifier:
      kind: reward_channel
  types:
    tags: [demo]
"""


def test_reference_validation_block_is_accepted_and_kept(tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text(REFERENCE_MANIFEST)
    warnings: list[object] = []
    manifest = load_manifest(tmp_path, on_warning=warnings.append)
    assert warnings == []
    assert manifest.validation is not None
    assert manifest.validation["reward"]["range"] == [0.0, 1.0]


def test_init_writes_a_validation_block() -> None:
    data = yaml.safe_load(render_project("demo_env")["openenv.yaml"])
    assert data["validation"]["reward"]["range"][0] == 0.0
    assert data["validation"]["resources"]["episode_timeout_s"] > 0
