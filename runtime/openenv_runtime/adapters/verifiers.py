"""verifiers environments served: ``verifiers:TASKSET-ID[?key=value&...]``.

``TASKSET-ID`` is what ``vf-eval`` takes: an installed taskset package (or one of
``verifiers.v1.tasksets``) exporting its ``Taskset`` subclass in ``__all__``. The environment
is ``verifiers.v1.load_environment`` of the run config naming that taskset; the query options
are the fields of the taskset's config class (``num_tasks=5``), typed by it. One option is the
adapter's own: ``max_turns`` (default 32), the model turns an episode takes before it is cut.

The client plays the model. An episode is one task of the taskset: ``reset(task_index=i)``
starts task ``i``; ``reset(seed=s)`` task ``s % size``; a bare ``reset()`` the next task of a
cursor the whole server shares. The observation carries the chat ``messages`` the model would
see (the task's system prompt and prompt) and the ``tools`` it may call (the task's and the
taskset's ``Toolset`` methods marked ``@vf.tool``, named ``<server>_<tool>`` as verifiers
advertises them). The action is one assistant turn: ``content`` and optionally
``tool_calls``. A turn with tool calls runs them in the server (each tool result becomes a
``tool`` message of the next observation); a turn without ends the episode. The same tools
are the server's MCP tools (``tools/list``, and ``tools/call`` within a session's running
episode, outside its trace). After a turn with
tool calls, verifiers' own checks before a next model call run: ``max_turns``, then the task's
``@vf.stop`` predicates over the trace; either ends the episode too. Then the task's own scoring runs
(``Task.score``: its ``@vf.reward`` and ``@vf.metric`` functions, plugged ones and judges) on
the episode's trace, and the reward is the trace's weighted sum, exactly as verifiers
computes it; ``rewards`` and ``metrics`` carry the named parts.

Rewards and tools that need a sandbox runtime (a ``runtime`` parameter without a default)
are skipped, as verifiers itself skips them when it scores without a runtime.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import version
from typing import Any
from uuid import uuid4

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from ..environment import Environment
from ..errors import AdapterError
from ..mcp.environment import ToolCallResult
from ..mcp.types import Tool as McpTool
from ..models import Action, Observation, State
from .options import convert_option
from .target import AdaptedEnvironment
from .task_list import MAX_LISTED, IndexedTaskApi, TaskCursor, check_split, episode_index

MAX_TURNS_OPTION = "max_turns"
DEFAULT_MAX_TURNS = 32
TASKS_ARE = "a verifiers taskset"
# Task data fields shown to the client: the rest (reference answers, ...) stay in the server.
_SHOWN_TASK_FIELDS = ("idx", "id", "name", "description")


class VerifiersToolCall(BaseModel):
    """One tool call of an assistant turn, as a chat model emits it."""

    name: str = Field(description="The tool's name, as the observation's tools list it.")
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="The arguments: an object, or its JSON text."
    )
    id: str | None = Field(default=None, description="The call's id (made up when left out).")


class VerifiersAction(Action):
    """One assistant turn: its text, and the tools it calls (none ends the episode)."""

    content: str = Field(default="", description="The assistant's reply.")
    tool_calls: list[VerifiersToolCall] = Field(
        default_factory=list, description="Tools to call; the results come back as messages."
    )


class VerifiersObservation(Observation):
    """The conversation so far and, once the episode ends, the task's scores."""

    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="On reset the prompt; after a turn, the messages it added (tool results).",
    )
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="The tools the model may call (OpenAI function form)."
    )
    task_index: int = Field(default=0, description="The task's index in the taskset.")
    rewards: dict[str, float] = Field(
        default_factory=dict, description="Each named reward's score, once the episode ends."
    )
    metrics: dict[str, float] = Field(
        default_factory=dict, description="Each named metric, once the episode ends."
    )
    stop_condition: str | None = Field(
        default=None,
        description="The @vf.stop predicate or max_turns that ended the episode; None when a "
        "reply without tool calls did.",
    )


class VerifiersState(State):
    """The episode's task and how it ended."""

    taskset: str = ""
    task_index: int | None = None
    stop_condition: str | None = None


class TaskSource:
    """One taskset's tasks, read once per served target and shared by its sessions."""

    def __init__(self, name: str, env: Any, max_turns: int) -> None:
        self.name = name
        self.env = env
        self.taskset = env.taskset
        # An infinite taskset is cut at one Task API page.
        self.tasks: list[Any] = list(itertools.islice(iter(self.taskset), MAX_LISTED))
        if not self.tasks:
            raise AdapterError(f"verifiers taskset {name!r} loaded no task: check its options.")
        self.size = len(self.tasks)
        self.max_turns = max_turns
        self.cursor = TaskCursor()

    def task(self, index: int) -> Any:
        if not 0 <= index < self.size:
            raise IndexError(
                f"task_index {index} is outside taskset {self.name!r} (0..{self.size - 1})"
            )
        return self.tasks[index]

    def listing(self, index: int) -> dict[str, Any]:
        task = self.task(index)
        return {"index": index, "prompt": prompt_messages(task.data), **shown_fields(task.data)}

    def toolsets(self, task: Any) -> list[Any]:
        """The tool servers of one episode: the task's own, then the taskset's shared ones."""
        return [
            *type(task).toolsets(task.config),
            *type(self.taskset).toolsets(self.taskset.config),
        ]


def shown_fields(data: Any) -> dict[str, Any]:
    """The task data a client may see (no reference answer)."""
    shown = {key: getattr(data, key, None) for key in _SHOWN_TASK_FIELDS}
    jsonable: dict[str, Any] = to_jsonable_python(
        {k: v for k, v in shown.items() if v is not None}, fallback=str
    )
    return jsonable


def prompt_messages(data: Any) -> list[dict[str, Any]]:
    """The chat messages a task opens with: its system prompt, then its prompt."""
    messages: list[dict[str, Any]] = []
    if getattr(data, "system_prompt", None):
        messages.append({"role": "system", "content": data.system_prompt})
    prompt = getattr(data, "prompt", None)
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    elif prompt:
        messages.extend(as_message_dict(message) for message in prompt)
    return messages


def as_message_dict(message: Any) -> dict[str, Any]:
    """A message (a pydantic model or a mapping) as plain JSON data, unset fields left out."""
    if isinstance(message, BaseModel):
        dumped: dict[str, Any] = message.model_dump(mode="json", exclude_none=True)
        return dumped
    return {
        k: v for k, v in to_jsonable_python(dict(message), fallback=str).items() if v is not None
    }


def call_arguments(call: VerifiersToolCall) -> tuple[str, dict[str, Any] | None]:
    """The call's arguments as verifiers records them (JSON text) and as keyword arguments
    (None when the text is not a JSON object)."""
    if isinstance(call.arguments, dict):
        return json.dumps(call.arguments), call.arguments
    try:
        parsed = json.loads(call.arguments or "{}")
    except ValueError:
        return call.arguments, None
    return call.arguments, parsed if isinstance(parsed, dict) else None


class Tool:
    """One ``@vf.tool`` method of a tool server, callable in the server.

    Its arguments are validated and converted by its signature (``"2"`` for an ``int``
    parameter is 2), as an MCP server does before a call; its parameters' JSON schema comes
    from the same signature (a bound method's: ``self`` left out).
    """

    def __init__(self, server_name: str, fn: Callable[..., Any]) -> None:
        raw = getattr(fn, "tool_name", None) or fn.__name__
        self.name = f"{server_name}_{raw}" if server_name else raw
        self.requires_runtime = "runtime" in inspect.signature(fn).parameters
        # A callable is a valid TypeAdapter type at run time: it validates a call's arguments.
        self.call: TypeAdapter[Any] = TypeAdapter(fn)  # type: ignore[arg-type]
        self.description = (fn.__doc__ or "").strip()
        self.parameters = self.call.json_schema()
        self.schema = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    async def __call__(self, arguments: dict[str, Any]) -> str:
        """The tool's answer as text (JSON when it is not a string); raises
        ``pydantic.ValidationError`` for arguments the signature refuses."""
        result = self.call.validate_python(arguments)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else json.dumps(to_jsonable_python(result))


def discover_tools(servers: Sequence[Any]) -> dict[str, Tool]:
    """Every ``@vf.tool`` method of ``servers``, by the name verifiers advertises."""
    tools: dict[str, Tool] = {}
    for server in servers:
        for klass in type(server).__mro__:
            for attr, fn in vars(klass).items():
                if callable(fn) and getattr(fn, "tool", False) is True:
                    tool = Tool(server.server_name, getattr(server, attr))
                    tools.setdefault(tool.name, tool)
    return tools


class VerifiersEnvironment(
    IndexedTaskApi, Environment[VerifiersAction, VerifiersObservation, VerifiersState]
):
    """One session over a shared :class:`TaskSource`."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    TASKS_ARE = TASKS_ARE

    def __init__(self, source: TaskSource) -> None:
        super().__init__()
        self.source = source
        self._task: Any = None
        self._trace: Any = None
        self._tools: dict[str, Tool] = {}
        self._turns = 0
        self._done = True
        self._state = VerifiersState(taskset=source.name)

    # The server calls the async forms; the plain ones are for a caller without a loop.
    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> VerifiersObservation:
        return asyncio.run(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    def step(self, action: VerifiersAction, **kwargs: Any) -> VerifiersObservation:
        return asyncio.run(self.step_async(action, **kwargs))

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_index: int | str | None = None,
        split: str | None = None,
        **kwargs: Any,
    ) -> VerifiersObservation:
        import verifiers.v1 as vf
        from verifiers.v1.state import state_cls
        from verifiers.v1.trace import TraceTask

        check_split(split, TASKS_ARE)
        index = episode_index(self.source.size, self.source.cursor, task_index, seed)
        task = self.source.task(index)
        servers = self.source.toolsets(task)
        for server in servers:
            await server.setup()
            await server.setup_task(task)
        self._tools = discover_tools(servers)
        self._task = task
        self._trace = vf.Trace(
            task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
            state=state_cls(type(task))(),
            agent=vf.AgentInfo(config=vf.AgentConfig(max_turns=self.source.max_turns)),
        )
        opening = prompt_messages(task.data)
        for message in opening:
            self._append(message, sampled=False)
        self._turns = 0
        self._done = False
        self._state = VerifiersState(
            episode_id=episode_id or str(uuid4()), taskset=self.source.name, task_index=index
        )
        return VerifiersObservation(
            messages=opening,
            tools=[tool.schema for tool in self._tools.values()],
            task_index=index,
            reward=0.0,
            metadata=shown_fields(task.data),
        )

    async def step_async(
        self, action: VerifiersAction, timeout_s: float | None = None, **kwargs: Any
    ) -> VerifiersObservation:
        if self._task is None or self._done:
            raise RuntimeError("The episode is over (or never started): call reset() first.")
        calls = [(call.id or f"call_{uuid4().hex[:12]}", call) for call in action.tool_calls]
        assistant: dict[str, Any] = {"role": "assistant", "content": action.content}
        if calls:
            assistant["tool_calls"] = [
                {"id": call_id, "name": call.name, "arguments": call_arguments(call)[0]}
                for call_id, call in calls
            ]
        self._append(assistant, sampled=True)
        self._turns += 1
        self._state.step_count += 1
        added = [await self._run_tool(call_id, call) for call_id, call in calls]
        for message in added:
            self._append(message, sampled=False)
        if not await self._ended(bool(calls)):
            return VerifiersObservation(
                messages=added,
                task_index=self._state.task_index or 0,
                reward=0.0,
                metadata=shown_fields(self._task.data),
            )
        return await self._finish(added)

    async def _run_tool(self, call_id: str, call: VerifiersToolCall) -> dict[str, Any]:
        content, _ = await self._answer(call.name, call_arguments(call)[1])
        return {"role": "tool", "tool_call_id": call_id, "name": call.name, "content": content}

    async def _answer(self, name: str, arguments: dict[str, Any] | None) -> tuple[str, bool]:
        """What tool ``name`` answers the model (its own failure included, as text, as in
        verifiers), and whether that is an error."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return f"Error: no tool named {name!r} (tools: {known}).", True
        if tool.requires_runtime:
            return f"Error: tool {name!r} needs a sandbox runtime, which this server lacks.", True
        if arguments is None:
            return f"Error: the arguments of {name!r} are not a JSON object.", True
        try:
            return await tool(arguments), False
        except Exception as exc:  # the tool's own failure is the model's to read
            return f"Error: {type(exc).__name__}: {exc}", True

    # -- MCP: tools/list and tools/call ----------------------------------------------------
    def list_tools(self) -> list[McpTool]:
        """The tools, as MCP lists them: the running episode's, else those task 0 offers."""
        tools = self._tools or discover_tools(self.source.toolsets(self.source.task(0)))
        return [
            McpTool(name=tool.name, description=tool.description, input_schema=tool.parameters)
            for tool in tools.values()
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolCallResult:
        """Run tool ``name`` in the running episode's tool servers, as a tool call of a step
        would, but outside the trace: the rewards score the turns sent as steps."""
        if self._task is None or self._done:
            raise RuntimeError(
                "verifiers tools run within an episode: reset this session first (an MCP "
                "call without a session has none)."
            )
        text, failed = await self._answer(name, arguments)
        return ToolCallResult(
            content=[{"type": "text", "text": text}],
            structured_content=None,
            meta=None,
            data=text,
            is_error=failed,
        )

    async def _ended(self, called_tools: bool) -> bool:
        """Whether the episode ends after this turn. A reply without tool calls ends it; after
        one with, verifiers' checks before the next model call run: ``max_turns`` first, then
        the task's ``@vf.stop`` predicates over the trace, each recorded on the trace as
        verifiers records it."""
        import verifiers.v1 as vf
        from verifiers.v1.session import call_hook, hook_boundary

        if not called_tools:
            return True
        if self._turns >= self.source.max_turns:
            self._trace.stop("max_turns")
            return True
        for predicate in self._task.hooks("stop"):
            # Request and Response predicates read a model call, which a client-played turn lacks.
            if hook_boundary(predicate, allow_trace=True) is not vf.Trace:
                continue
            if await call_hook(predicate, {vf.Trace: self._trace}) is True:
                self._trace.stop(predicate.__name__)
                return True
        return False

    async def _finish(self, added: list[dict[str, Any]]) -> VerifiersObservation:
        trace = self._trace
        stop = trace.stop_condition
        trace.is_completed = True
        trace.ok = True
        await self._task.score(trace)
        self._done = True
        self._state.stop_condition = stop
        rewards = {k: float(r.score) for k, r in trace.rewards.items() if r is not None}
        metrics = {k: float(v) for k, v in trace.metrics.items() if v is not None}
        return VerifiersObservation(
            messages=added,
            task_index=self._state.task_index or 0,
            rewards=rewards,
            metrics=metrics,
            stop_condition=stop,
            reward=float(trace.reward),
            done=True,
            metadata=shown_fields(self._task.data),
        )

    def _append(self, message: dict[str, Any], *, sampled: bool) -> None:
        import verifiers.v1 as vf

        nodes = self._trace.nodes
        parsed = TypeAdapter(vf.Message).validate_python(message)
        parent = len(nodes) - 1 if nodes else None
        nodes.append(vf.MessageNode(parent=parent, message=parsed, sampled=sampled))

    @property
    def state(self) -> VerifiersState:
        return self._state

    @property
    def task_source(self) -> TaskSource:
        return self.source


def max_turns_option(options: Mapping[str, str]) -> int:
    raw = options.get(MAX_TURNS_OPTION, str(DEFAULT_MAX_TURNS))
    try:
        turns = int(raw)
    except ValueError:
        turns = 0
    if turns < 1:
        raise AdapterError(
            f"Option {MAX_TURNS_OPTION}={raw!r} must be a whole number ≥ 1, e.g. max_turns=8."
        )
    return turns


def taskset_options(
    name: str, options: Mapping[str, str], fields: Mapping[str, Any]
) -> dict[str, Any]:
    """The taskset config values of ``options``, typed by the config's ``fields``
    (``model_fields`` of its class); the adapter's own option left out."""
    typed: dict[str, Any] = {}
    for key, value in options.items():
        if key == MAX_TURNS_OPTION:
            continue
        if key == "id" or key not in fields:
            known = ", ".join(sorted(k for k in fields if k != "id")) or "none"
            raise AdapterError(
                f"verifiers taskset {name!r} has no option {key!r}; its options are: {known} "
                f"(and {MAX_TURNS_OPTION})."
            )
        typed[key] = convert_option(key, value, fields[key].annotation)
    return typed


def load(name: str, options: Mapping[str, str]) -> AdaptedEnvironment:
    """The verifiers taskset ``name`` configured with ``options``, as an environment."""
    import verifiers.v1 as vf

    max_turns = max_turns_option(options)
    try:
        config_cls = vf.taskset_config_type(name)
    except (ModuleNotFoundError, AttributeError, TypeError, ValueError) as exc:
        said = " ".join(str(exc).split())
        raise AdapterError(f"No verifiers environment {name!r}: {said}") from None
    typed = taskset_options(name, options, config_cls.model_fields)
    try:
        config = vf.resolve_env_config({"taskset": {"id": name, **typed}})
        env = vf.load_environment(config)
    except (ValidationError, ValueError, TypeError) as exc:
        said = " ".join(str(exc).split())
        raise AdapterError(f"verifiers refused the options of {name!r}: {said}") from None
    source = TaskSource(name, env, max_turns)
    return AdaptedEnvironment(
        factory=lambda: VerifiersEnvironment(source),
        action_cls=VerifiersAction,
        observation_cls=VerifiersObservation,
        state_cls=VerifiersState,
        name=f"verifiers:{name}",
        description=f"verifiers taskset {name} ({source.size} tasks), scored by its own rewards",
        package="verifiers",
        package_version=version("verifiers"),
    )
