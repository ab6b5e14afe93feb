"""openenv_cli.collect.card: the dataset card's front matter and escaped names."""

from __future__ import annotations

import yaml

from openenv_cli.collect.card import render_card
from openenv_cli.collect.spec import CollectSpec

SPEC = CollectSpec(targets=("http://127.0.0.1:1",), episodes=2, policy="random")


def test_front_matter_is_yaml_the_hub_reads() -> None:
    card = render_card(SPEC, {"environment": {"name": "{{ 7 * 7 }}"}}, {"episodes": 2})
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["configs"] == [{"config_name": "default", "data_files": "data/shard-*.parquet"}]
    assert "openenv" in front["tags"]
    # names are text, never a template: no 49 from {{ 7 * 7 }}
    assert "# Episodes of \\{\\{ 7 \\* 7 \\}\\}" in card and "49" not in card
