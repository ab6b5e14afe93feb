"""Reading a ``reset``/``step`` reply into a ``StepResult``: in one pass when it can, else the general way.

The general way (``protocol.reply_data`` then ``EnvClient._parse_result``) decodes the whole
reply into dicts, moves ``reward`` and ``done`` into the observation's dict and validates
that. For the usual observation class pydantic-core can do it in one call instead: it
validates the envelope ``{"type": "observation", "data": {...}}`` straight from the JSON,
building the observation on the way, and only ``reward`` and ``done`` are put in afterwards.
That saves about 2,000 of the client's 115,000 instructions per step
(``benchmarks/client/client_callgrind.py``), paid per step of every session of a trainer.

The one-pass reader gives the same result as the general way, or none at all:

* it is made only for classes where setting ``reward`` and ``done`` after validation cannot
  differ from validating them with the rest: no validators, no ``model_post_init``, no own
  ``model_validate``, not strict, and ``reward``/``done`` declared as ``Observation`` does;
* any reply it does not accept as it is (an ``error`` reply, a field this client does not
  know, a ``reward`` or ``done`` that is not a JSON number, boolean or null as such: the
  general way passes them on unconverted) gives None, and the caller reads it the general way, which
  raises or tolerates exactly as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, KeysView
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from typing_extensions import NotRequired, TypedDict

from ..models import ENVELOPE_FIELDS, Observation, StepResult

OnePassReader = Callable[[str | bytes], StepResult[Any] | None]


def _readable(cls: type[Observation]) -> bool:
    """Whether validating without ``reward``/``done`` and setting them after is the same."""
    if not cls.__pydantic_complete__ or cls.model_config.get("strict"):
        return False
    if _own_model_validate(cls):
        return False
    if cls.__pydantic_post_init__ is not None:
        return False
    decorators = cls.__pydantic_decorators__
    if (
        decorators.validators
        or decorators.field_validators
        or decorators.root_validators
        or decorators.model_validators
    ):
        return False
    for name in ENVELOPE_FIELDS:
        field, base = cls.model_fields.get(name), Observation.model_fields[name]
        if field is None or field.annotation != base.annotation or field.metadata:
            return False
    return True


@functools.lru_cache(maxsize=256)  # bounded: classes made at run time do not pile up
def general_reader(cls: type[Observation]) -> tuple[KeysView[str], Callable[[Any], Any]]:
    """The general way's view of an observation class: its field names and how to build one
    from a dict, looked up once per class (``model_fields`` and ``model_validate`` cost
    Python work per call)."""
    fields = cls.model_fields.keys()
    if _own_model_validate(cls) or not cls.__pydantic_complete__:
        return fields, cls.model_validate  # its own model_validate, or not built yet
    return fields, cls.__pydantic_validator__.validate_python


def _own_model_validate(cls: type[Observation]) -> bool:
    return getattr(cls.model_validate, "__func__", None) is not _MODEL_VALIDATE


@functools.lru_cache(maxsize=256)  # bounded: classes made at run time do not pile up
def one_pass_reader(cls: type[Observation]) -> OnePassReader | None:
    """The one-pass reader of replies carrying ``cls``, or None when ``cls`` needs the general way."""
    if not _readable(cls):
        return None
    reward = Observation.model_fields["reward"].annotation
    data = _typed_dict(
        "Data",
        {
            "observation": cls,
            "reward": reward,
            "done": bool,
            "metadata": NotRequired[Any],
        },
    )
    # Strict: "0.5" or "false" would be converted here, while the general way hands the
    # reply's own value to StepResult (and bool("false") is True). The observation keeps
    # its own config.
    data.__pydantic_config__ = ConfigDict(strict=True)
    envelope = _typed_dict("Envelope", {"type": Literal["observation"], "data": data})
    validate = TypeAdapter(envelope).validator.validate_json

    def read(raw: str | bytes) -> StepResult[Any] | None:
        try:
            body = validate(raw)["data"]
        except ValidationError:
            return None
        observation = body["observation"]
        values = observation.__dict__
        reward = values["reward"] = body["reward"]
        done = values["done"] = body["done"]
        observation.__pydantic_fields_set__.update(ENVELOPE_FIELDS)
        return StepResult(observation, reward, done, body.get("metadata"))

    return read


# TypedDict's functional form, typed as a plain call: the observation's type (a field's type
# here) is only known at run time, which a static checker cannot follow.
_typed_dict: Any = TypedDict
_MODEL_VALIDATE = BaseModel.model_validate.__func__  # type: ignore[attr-defined]
