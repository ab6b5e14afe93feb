"""``environment_factory``: an environment class with TRL's ``environment_factory`` contract.

TRL creates instances, calls ``reset(**row)`` (its text joins the prompt), offers every public
method as a tool (typed arguments, Google-style docstring) and, when present, scores the
episode with ``get_reward()``. Our class keeps one session per instance, on the given servers
in turn; MCP environments expose their own tools, others one ``step`` tool whose arguments
are the action's fields.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import itertools
import json
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..http_reads import read_schema
from .mapping import default_to_message

_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
_FORWARDED = ("seed", "episode_id")
_EXIT_WAIT_S = 3.0  # for every session still open at exit, in all
_open: weakref.WeakSet[Any] = weakref.WeakSet()  # the (blocking) clients of live sessions
_exit_hook = threading.Lock()
_exit_hook_installed = False


def _python_type(spec: dict[str, Any]) -> type:
    kind = spec.get("type")
    if kind is None:
        for option in spec.get("anyOf") or []:
            if isinstance(option, dict) and option.get("type") not in (None, "null"):
                kind = option["type"]
                break
    return _TYPES.get(str(kind), str)


def make_tool(
    name: str,
    description: str,
    schema: dict[str, Any],
    call: Callable[[Any, dict[str, Any]], str],
) -> Callable[..., str]:
    """A method ``name`` whose signature, type hints and docstring describe ``schema``."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    for field, spec in sorted(properties.items(), key=lambda kv: kv[0] not in required):
        kind = _python_type(spec if isinstance(spec, dict) else {})
        default = inspect.Parameter.empty if field in required else spec.get("default")
        parameters.append(
            inspect.Parameter(
                field, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=kind
            )
        )
        annotations[field] = kind
        text = (spec.get("description") if isinstance(spec, dict) else None) or field
        lines.append(f"    {field}: {' '.join(str(text).split())}")
    annotations["return"] = str

    def tool(self: Any, *args: Any, **kwargs: Any) -> str:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = {k: v for k, v in bound.arguments.items() if k != "self"}
        return call(self, values)

    signature = inspect.Signature(parameters, return_annotation=str)
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    tool.__name__ = tool.__qualname__ = name
    summary = " ".join((description or f"Call {name}.").split())
    doc = f"{summary}\n\nArgs:\n" + "\n".join(lines) if lines else summary
    tool.__doc__ = doc + "\n\nReturns:\n    The environment's answer."
    return tool


def environment_factory(
    env: str | Sequence[str],
    *,
    mcp: bool | None = None,
    to_message: Callable[[Any], str] | None = None,
    reset_keys: Sequence[str] = _FORWARDED,
    client_kwargs: dict[str, Any] | None = None,
    name: str = "OpenEnvEnvironment",
) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` over the servers at ``env``.

    Args:
        env: a server URL or a list of URLs (instances take them in turn).
        mcp: whether the environment is an MCP tool environment (default: asked from its
            ``/schema``); its tools become the methods, else one ``step`` tool.
        to_message: an observation as text (default: its fields without reward/done/metadata).
        reset_keys: dataset columns passed on to the environment's ``reset``.
        client_kwargs: passed to each client (``token``, ...).
    """
    urls = [env] if isinstance(env, str) else list(env)
    if not urls:
        raise ValueError("environment_factory needs at least one server URL")
    options = dict(client_kwargs or {})
    schema = read_schema(urls[0], token=options.get("token"))
    action = schema.get("action") or {}
    is_mcp = _looks_mcp(action) if mcp is None else mcp
    show = to_message or default_to_message
    turn = itertools.count()
    methods: dict[str, Any] = {}

    def _connect(self: Any) -> Any:
        if self._client is None:
            url = urls[next(turn) % len(urls)]
            if is_mcp:
                from ..client.mcp import MCPToolClient

                self._client = MCPToolClient(url, **options).sync()
            else:
                from ..client import GenericEnvClient

                self._client = GenericEnvClient(url, **options).sync()
            self._client.connect()
            _track(self._client)
        return self._client

    def __init__(self: Any) -> None:
        self._client = None
        self.rewards = []
        self.done = False

    def reset(self: Any, **row: Any) -> str | None:
        """Start an episode; returns the first observation's text."""
        client = _connect(self)
        self.rewards, self.done = [], False
        result = client.reset(**{k: row[k] for k in reset_keys if row.get(k) is not None})
        text = show(result.observation) if result.observation is not None else ""
        return text or None

    def get_reward(self: Any) -> float:
        """The episode's total reward so far."""
        return float(sum(self.rewards))

    def _del(self: Any) -> None:
        # Never wait here: a finalizer may run at interpreter shutdown, when the clients'
        # loop thread no longer runs, or in that very thread.
        client, self._client = getattr(self, "_client", None), None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close_soon()

    methods.update(__init__=__init__, reset=reset, get_reward=get_reward, __del__=_del)
    if is_mcp:
        probe = _connect_probe(urls[0], options)
        for tool in probe:
            methods[tool.name] = make_tool(
                tool.name, tool.description, tool.input_schema, _call_tool(tool.name)
            )
    else:
        description = (
            schema.get("action", {}).get("description") or "Take one action in the environment."
        )
        fields = {k: v for k, v in (action.get("properties") or {}).items() if k != "metadata"}
        methods["step"] = make_tool(
            "step", description, {**action, "properties": fields}, _step(show)
        )
    return type(name, (), methods)


def _track(client: Any) -> None:
    """Remember an instance's client, to end its session at exit (once, bounded)."""
    global _exit_hook_installed
    _open.add(client)
    with _exit_hook:
        if not _exit_hook_installed:
            atexit.register(_close_open_sessions)
            _exit_hook_installed = True


def _close_open_sessions() -> None:
    """At exit, while the clients' loop still runs: end the sessions instances still hold,
    waiting ``_EXIT_WAIT_S`` seconds in all (a server that does not answer is left)."""
    deadline = time.monotonic() + _EXIT_WAIT_S
    for client in list(_open):
        _open.discard(client)
        left = deadline - time.monotonic()
        with contextlib.suppress(Exception):
            if left > 0:
                client.close(timeout=left)
            else:
                client.close_soon()


def _step(show: Callable[[Any], str]) -> Callable[[Any, dict[str, Any]], str]:
    def call(self: Any, values: dict[str, Any]) -> str:
        if self.done:
            raise ValueError("the episode is over; no more actions")
        result = self._client.step(values)
        self.rewards.append(float(result.reward or 0.0))
        self.done = bool(result.done)
        return show(result.observation)

    return call


def _call_tool(tool: str) -> Callable[[Any, dict[str, Any]], str]:
    def call(self: Any, values: dict[str, Any]) -> str:
        value = self._client.call_tool(tool, **values)
        return value if isinstance(value, str) else json.dumps(value, default=str)

    return call


def _looks_mcp(action: dict[str, Any]) -> bool:
    text = json.dumps(action)
    return "tool_name" in text or "CallToolAction" in text


def _connect_probe(url: str, options: dict[str, Any]) -> list[Any]:
    from ..client.mcp import MCPToolClient

    with MCPToolClient(url, **options).sync() as client:
        return list(client.list_tools())
