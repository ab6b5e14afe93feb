"""Every public name of the reference's ``openenv.core`` imports from ``openenv_runtime.compat``.

``openenv_runtime.compat.REFERENCE_NAMES`` is the one list of the reference 0.10.0's public
names (``openenv.core.__all__``, ``openenv.core.env_server.__all__``, the rubrics and
``openenv``'s top level); ``MODULE_NAMES`` below holds the names its environments import from
submodules. Renaming the module prefix must be the whole port.
"""

from __future__ import annotations

import dis
import importlib
import io
import sys
from typing import Any

import pytest

import openenv_runtime
from openenv_runtime import compat
from openenv_runtime.compat import REFERENCE_NAMES
from openenv_runtime.errors import EnvError

# module (after the rename) → names the reference's environments and tests import from it
MODULE_NAMES = {
    "env_server": ["create_app", "Action", "Observation", "State", "Environment", "MCPEnvironment"],
    "env_server.types": [
        "Action",
        "Observation",
        "State",
        "CodeExecResult",
        "EnvironmentMetadata",
        "ConcurrencyConfig",
        "HealthStatus",
        "ServerMode",
        "WSErrorCode",
        "HealthResponse",
    ],
    "env_server.interfaces": [
        "Environment",
        "Transform",
        "Message",
        "ModelTokenizer",
        "Action",
        "Observation",
        "State",
    ],
    "env_server.http_server": ["create_app", "create_fastapi_app", "HTTPEnvServer"],
    "env_server.mcp_types": [
        "CallToolAction",
        "ListToolsAction",
        "Tool",
        "JsonRpcRequest",
        "RESERVED_TOOL_NAMES",
    ],
    "env_server.mcp_environment": ["MCPEnvironment"],
    "env_server.serialization": ["serialize_observation", "deserialize_action"],
    "env_server.base_transforms": ["CompositeTransform", "NullTransform"],
    "env_server.web_interface": ["create_web_interface_app", "load_environment_metadata"],
    "env_server.exceptions": ["OpenEnvError", "SessionCapacityError"],
    "env_server.route_config": ["GetEndpointConfig"],
    "client_types": ["StepResult"],
    "env_client": ["EnvClient"],
    "generic_client": ["GenericEnvClient", "GenericAction"],
    "sync_client": ["SyncEnvClient"],
    "mcp_client": ["MCPToolClient", "MCPClientBase"],
    "llm_client": ["LLMClient", "OpenAIClient", "create_llm_client"],
    "rubrics": ["Rubric", "LLMJudge"],
    "rubrics.base": ["Rubric"],
    "rubrics.containers": ["Sequential", "Gate", "WeightedSum", "RubricList", "RubricDict"],
    "rubrics.trajectory": ["TrajectoryRubric", "ExponentialDiscountingTrajectoryRubric"],
    "rubrics.llm_judge": ["LLMJudge"],
    "containers.runtime": [
        "ContainerProvider",
        "LocalDockerProvider",
        "DockerSwarmProvider",
        "KubernetesProvider",
        "RuntimeProvider",
        "UVProvider",
        "DaytonaProvider",
    ],
    "containers.runtime.providers": ["ContainerProvider", "LocalDockerProvider"],
    "containers.runtime.uv_provider": ["UVProvider"],
    "tools.git_server_client": ["GitServerClient"],
    "evals": ["EvalHarness", "EvalConfig", "EvalResult", "InspectAIHarness"],
    "evals.base": ["EvalHarness"],
    "evals.types": ["EvalConfig", "EvalResult"],
    "evals.inspect_harness": ["InspectAIHarness"],
}


@pytest.mark.parametrize("name", sorted(REFERENCE_NAMES))
def test_reference_name_is_importable_from_the_compat_package(name: str) -> None:
    assert getattr(compat, name) is not None
    assert name in dir(compat) and name in compat.__all__


def test_reference_list_holds_the_reference_surface() -> None:
    # a few names from each part of the reference's surface, and the count of the list
    for name in ("EnvClient", "WSStepMessage", "MCPEnvironment", "Rubric", "AutoEnv"):
        assert name in REFERENCE_NAMES
    assert len(REFERENCE_NAMES) == 89


def test_the_package_face_lists_only_our_names() -> None:
    for name in ("WSStepMessage", "HTTPEnvServer", "Rubric", "AutoEnv", "MCPToolClient"):
        assert not hasattr(openenv_runtime, name) and name not in dir(openenv_runtime)


@pytest.mark.parametrize("module", sorted(MODULE_NAMES))
def test_reference_module_paths_have_aliases(module: str) -> None:
    loaded = importlib.import_module(f"openenv_runtime.compat.{module}")
    for name in MODULE_NAMES[module]:
        assert hasattr(loaded, name), f"openenv_runtime.compat.{module} lacks {name}"


def test_internals_without_an_equivalent_say_what_to_use() -> None:
    from openenv_runtime.compat.env_server import WebInterfaceManager

    with pytest.raises(NotImplementedError, match="/web"):
        WebInterfaceManager()


def test_unknown_names_still_raise_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = openenv_runtime.NotAThing  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = compat.NotAThing


def test_env_error_is_what_reference_users_catch() -> None:
    assert isinstance(EnvError("VALIDATION_ERROR", "bad"), RuntimeError)
    refused = EnvError("CONNECTION_ERROR", "cannot connect")
    assert isinstance(refused, ConnectionError) and isinstance(refused, RuntimeError)
    assert refused.code == "CONNECTION_ERROR" and str(refused).startswith("cannot connect")
    # only what the server answered reads as a server error
    assert str(EnvError("VALIDATION_ERROR", "bad")) == "Server error: bad (code: VALIDATION_ERROR)"


def test_chat_message_type_works_in_models_before_python_312() -> None:
    # chat environments keep list[Message] in their observations; typing.TypedDict fails there
    from pydantic import BaseModel

    from openenv_runtime.compat.env_server.interfaces import Message

    class History(BaseModel):
        messages: list[Message]

    assert History(messages=[{"role": "user", "content": "hi"}]).messages[0]["role"] == "user"


def test_mcp_types_are_routed_only_for_tool_servers() -> None:
    # a server whose action class is its own validates everything itself, as in the reference
    from pydantic import ValidationError

    from openenv_runtime import Action
    from openenv_runtime.compat.env_server.serialization import deserialize_action
    from openenv_runtime.mcp import CallToolAction, ListToolsAction

    class Move(Action):
        value: str = "x"

    assert isinstance(deserialize_action({"type": "list_tools"}, Action), ListToolsAction)
    assert isinstance(deserialize_action({"type": "list_tools"}, CallToolAction), ListToolsAction)
    with pytest.raises(ValidationError):
        deserialize_action({"type": "call_tool", "tool_name": "x", "arguments": {}}, Move)


def test_reference_client_attribute_names_read_ours() -> None:
    from openenv_runtime import GenericEnvClient

    client = GenericEnvClient(
        "https://example.com", connect_timeout_s=30.0, message_timeout_s=120.0
    )
    assert client._ws_url == "wss://example.com/ws"
    assert (client._connect_timeout, client._message_timeout) == (30.0, 120.0)
    assert client.sync()._async is client


def test_a_clients_mode_is_fixed_when_it_is_made() -> None:
    from openenv_runtime import GenericEnvClient

    client = GenericEnvClient("https://example.com", mode="production")
    assert client._mode == "production"
    with pytest.raises(AttributeError, match="fixed when it is made"):
        client._mode = "simulation"


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info < (3, 11),
    reason="reads CPython's specialized bytecode (3.11+)",
)
def test_the_reference_names_leave_the_clients_attributes_on_the_fast_path() -> None:
    # Reading an instance's __dict__ turns its attributes into a plain dict; every attribute
    # read and write of the client (several per step) then takes CPython's slower path.
    from openenv_runtime import GenericEnvClient

    client = GenericEnvClient("https://example.com", connect_timeout_s=30.0)
    assert (client._mode, client._ws_url, client._connect_timeout) == (
        "simulation",
        "wss://example.com/ws",
        30.0,
    )
    assert client._message_timeout is None

    def read(c: Any) -> None:
        for _ in range(100):
            c._busy  # noqa: B018 (the read is what is measured)

    read(client)
    read(client)
    listing = io.StringIO()
    dis.dis(read, adaptive=True, file=listing)  # type: ignore[call-arg]
    loads = [line.split()[1] for line in listing.getvalue().splitlines() if "LOAD_ATTR" in line]
    assert loads == ["LOAD_ATTR_INSTANCE_VALUE"]
