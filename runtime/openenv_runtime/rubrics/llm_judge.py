"""``LLMJudge``: a rubric that asks a language model for the score."""

from __future__ import annotations

import re
from typing import Any

from ..llm.client import LLMClient
from .base import Rubric

DEFAULT_SCORE_PATTERN = r"(\d+\.?\d*)"


class LLMJudge(Rubric):
    """Renders ``prompt_template`` with ``{action}`` and ``{observation}``, asks ``client``.

    The first match of ``score_pattern`` (group 1 if it has groups) in the reply is the
    score, clamped to [0, 1] when ``normalize``; a reply without one scores
    ``default_score``. Any :class:`~openenv_runtime.llm.client.LLMClient` works, e.g.
    ``OpenAIClient`` pointed at any OpenAI-compatible endpoint.
    """

    def __init__(
        self,
        prompt_template: str,
        client: LLMClient,
        *,
        score_pattern: str | None = None,
        default_score: float = 0.0,
        normalize: bool = True,
    ) -> None:
        super().__init__()
        self.prompt_template = prompt_template
        self._client = client
        self._score_pattern = re.compile(score_pattern or DEFAULT_SCORE_PATTERN)
        self.default_score = default_score
        self.normalize = normalize

    async def forward(self, action: Any, observation: Any) -> float:
        reply = await self._client.complete(self._render_prompt(action, observation))
        return self._parse_score(reply)

    def _render_prompt(self, action: Any, observation: Any) -> str:
        return self.prompt_template.format(action=action, observation=observation)

    def _parse_score(self, reply: str) -> float:
        match = self._score_pattern.search(reply)
        if match is None:
            return self.default_score
        try:
            score = float(match.group(1) if match.lastindex else match.group(0))
        except ValueError:
            return self.default_score
        return min(1.0, max(0.0, score)) if self.normalize else score

    def state_dict(self) -> dict[str, Any]:
        return {
            "prompt_template": self.prompt_template,
            "score_pattern": self._score_pattern.pattern,
            "default_score": self.default_score,
            "normalize": self.normalize,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.prompt_template = state.get("prompt_template", self.prompt_template)
        if "score_pattern" in state:
            self._score_pattern = re.compile(state["score_pattern"])
        self.default_score = state.get("default_score", self.default_score)
        self.normalize = state.get("normalize", self.normalize)
