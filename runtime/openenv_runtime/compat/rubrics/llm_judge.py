"""The reference's ``openenv.core.rubrics.llm_judge``: the same names from :mod:`openenv_runtime.rubrics.llm_judge`."""

from ...rubrics.llm_judge import LLMJudge

__all__ = ["LLMJudge"]
