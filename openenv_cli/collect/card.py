"""The dataset card of a collection: Hub front matter, provenance and how to load it."""

from __future__ import annotations

import json
from typing import Any

import yaml

from openenv_cli.markdown_text import code_fence, inline

from .spec import CollectSpec


def render_card(spec: CollectSpec, provenance: dict[str, Any], summary: dict[str, Any]) -> str:
    """README.md for the output folder (the Hub's card format: YAML front matter, Markdown).

    Names from the server or the run (the environment's, say) are escaped where they are
    shown; nothing in them is rendered as a template, a line or a block of its own.
    """
    suffix = "parquet" if spec.format == "parquet" else "jsonl"
    front = yaml.safe_dump(
        {
            "tags": ["openenv", "reinforcement-learning", "episodes"],
            "configs": [{"config_name": "default", "data_files": f"data/shard-*.{suffix}"}],
        },
        sort_keys=False,
        allow_unicode=False,
    )
    env = provenance.get("environment", {})
    recorded = json.dumps(provenance, indent=2, sort_keys=True)
    fence = code_fence(recorded)
    return f"""---
{front}---

# Episodes of {inline(env.get("name") or "an environment")}

Collected with `openenv collect` (openenv-toolkit {inline(provenance.get("toolkit_version", "?"))}):
{int(summary.get("episodes", 0))} episodes, mean total reward {float(summary.get("mean_reward", 0.0)):.4f},
{int(summary.get("errors", 0))} with errors. One row per episode (schema version
{inline(provenance.get("schema_version"))}); `actions` and `observations` are JSON strings per step.

```python
from datasets import load_dataset
episodes = load_dataset("{suffix if suffix == "parquet" else "json"}", data_files="data/shard-*.{suffix}")["train"]
```

## Provenance

{fence}json
{recorded}
{fence}
"""
