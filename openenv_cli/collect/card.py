"""The dataset card of a collection: Hub front matter, provenance and how to load it."""

from __future__ import annotations

import json
from typing import Any

from .spec import CollectSpec


def render_card(spec: CollectSpec, provenance: dict[str, Any], summary: dict[str, Any]) -> str:
    """README.md for the output folder (``huggingface_hub``'s card format)."""
    from huggingface_hub import DatasetCard, DatasetCardData

    suffix = "parquet" if spec.format == "parquet" else "jsonl"
    data = DatasetCardData(
        tags=["openenv", "reinforcement-learning", "episodes"],
        configs=[{"config_name": "default", "data_files": f"data/shard-*.{suffix}"}],
    )
    env = provenance.get("environment", {})
    body = f"""
# Episodes of {env.get("name", "an environment")}

Collected with `openenv collect` (openenv-toolkit {provenance.get("toolkit_version", "?")}):
{summary.get("episodes", 0)} episodes, mean total reward {summary.get("mean_reward", 0.0):.4f},
{summary.get("errors", 0)} with errors. One row per episode (schema version
{provenance.get("schema_version")}); `actions` and `observations` are JSON strings per step.

```python
from datasets import load_dataset
episodes = load_dataset("{suffix if suffix == "parquet" else "json"}", data_files="data/shard-*.{suffix}")["train"]
```

## Provenance

```json
{json.dumps(provenance, indent=2, sort_keys=True)}
```
"""
    return str(DatasetCard.from_template(data, template_str="---\n{{ card_data }}\n---\n" + body))
