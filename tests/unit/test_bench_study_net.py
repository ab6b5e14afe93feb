"""Where the study sends its load for a published port: the host's address on Docker's bridge
when it is one of this machine's; the userland proxy's open-files limit and what it carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openenv_cli.bench import study_deploy, study_net


def test_local_addresses() -> None:
    assert study_net.is_local_address("127.0.0.1")
    assert not study_net.is_local_address("203.0.113.7")  # TEST-NET-3: never assigned here


class Networks:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs

    def get(self, name: str) -> Any:
        import docker.errors

        if name != "bridge":
            raise docker.errors.NotFound(f"network {name} not found")
        return self


class Client:
    def __init__(self, gateway: str) -> None:
        self.networks = Networks({"IPAM": {"Config": [{"Subnet": "x", "Gateway": gateway}]}})


def test_bridge_gateway_only_when_it_is_an_address_of_this_machine() -> None:
    assert study_net.bridge_gateway(Client("127.0.0.1"), "bridge") == "127.0.0.1"
    # An engine in a VM (Docker Desktop): its bridge is not reachable from here.
    assert study_net.bridge_gateway(Client("203.0.113.1"), "bridge") is None
    assert study_net.bridge_gateway(Client("127.0.0.1"), "docker_gwbridge") is None


def test_a_bridge_without_a_listed_gateway_gives_its_subnets_first_host() -> None:
    """Some engines list only the default bridge's subnet: the host is its first address."""
    client = Client("")
    client.networks = Networks({"IPAM": {"Config": [{"Subnet": "127.0.0.0/8"}]}})
    assert study_net.bridge_gateway(client, "bridge") == "127.0.0.1"
    client.networks = Networks({"IPAM": {"Config": [{"Subnet": "203.0.113.0/24"}]}})
    assert study_net.bridge_gateway(client, "bridge") is None  # not an address of this host
    client.networks = Networks({"IPAM": {"Config": [{"Subnet": "not a subnet"}]}})
    assert study_net.bridge_gateway(client, "bridge") is None


def fake_process(proc: Path, pid: int, argv: list[str], soft: str) -> None:
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / str(pid) / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        f"Max open files            {soft:<20} 20000                files     \n"
    )


def test_userland_proxy_limit_of_the_published_port(tmp_path: Path) -> None:
    proxy = ["/usr/sbin/docker-proxy", "-proto", "tcp", "-host-ip", "127.0.0.1", "-host-port"]
    fake_process(tmp_path, 10, [*proxy, "8000", "-container-ip", "172.17.0.2"], "1024")
    fake_process(tmp_path, 11, [*proxy, "41000", "-container-ip", "172.17.0.2"], "20000")
    fake_process(tmp_path, 12, ["python", "-host-port", "41001"], "9")
    assert study_net.userland_proxy_limit(41000, tmp_path) == 20000
    assert study_net.userland_proxy_limit(41001, tmp_path) is None  # not docker-proxy
    assert study_net.userland_proxy_limit(4100, tmp_path) is None  # a prefix is another port


def test_proxy_capacity_is_six_open_files_a_connection() -> None:
    # Measured: at 20,000 open files docker-proxy stopped ("accept4: too many open files")
    # during a burst of 4,096 sessions; 2,048 passed.
    assert study_net.proxy_capacity(20_000) == 3330
    assert 2048 < study_net.proxy_capacity(20_000) < 4096
    assert study_net.proxy_capacity(10) == 0


def test_reach_notes() -> None:
    through_proxy = study_net.reach_note("127.0.0.1", 41000, 20_000)
    assert "userland proxy" in through_proxy and "3,330 sessions" in through_proxy
    assert study_net.reach_note("127.0.0.1", 41000, None) == "reached at 127.0.0.1:41000"
    direct = study_net.reach_note("172.17.0.1", 41000, 20_000)
    assert direct.startswith("reached at 172.17.0.1:41000") and "kernel's NAT" in direct
    assert "no userland proxy" in study_net.reach_note("172.17.0.1", 41000, None)


def test_swarm_front_is_reached_on_the_gateway_bridge(monkeypatch: pytest.MonkeyPatch) -> None:
    import docker

    monkeypatch.setattr(docker, "from_env", lambda **_: object())
    monkeypatch.setattr(study_deploy, "bridge_gateway", lambda client, name: "172.18.0.1")
    monkeypatch.setattr(study_deploy, "userland_proxy_limit", lambda port: None)
    deployment = study_deploy.swarm_deployment("http://127.0.0.1:41000", "study-1")
    assert deployment.url == "http://172.18.0.1:41000"
    assert deployment.handle == "stack study-1"
    assert "172.18.0.1:41000" in deployment.notes[0]
    monkeypatch.setattr(study_deploy, "bridge_gateway", lambda client, name: None)
    assert study_deploy.swarm_deployment("http://127.0.0.1:41000", "s").url.startswith(
        "http://127.0.0.1:41000"
    )
