""".ci/docker-engine.sh starts dockerd without its userland proxy when iptables works: the proxy
holds six open files per connection and drops every connection when it runs out, which lost
every session of a 4,096 burst on a port published on 127.0.0.1.

The script runs with stand-ins for every command that could install or start something (they
record their arguments); nothing real is installed or started.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "docker-engine.sh"


def stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def dockerd_flags(tmp_path: Path, *, iptables_works: bool, **env: str) -> list[str]:
    """Run the script with stand-ins; return the flags it started dockerd with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "dockerd.args"
    stub(bin_dir, "docker", "exit 1")  # no engine answers yet
    stub(bin_dir, "id", "echo 0")
    stub(bin_dir, "dpkg-query", "echo 'install ok installed'")
    stub(bin_dir, "pgrep", "exit 1")  # no dockerd running (so the script stops waiting at once)
    stub(bin_dir, "iptables", "exit 0" if iptables_works else "exit 1")
    stub(bin_dir, "iptables-legacy", "exit 1")
    for name in ("apt-get", "update-alternatives"):
        stub(bin_dir, name, "exit 1")
    stub(bin_dir, "cgroupfs-mount", "exit 0")
    stub(bin_dir, "dockerd", f'printf "%s\\n" "$@" > {record}')
    stub(bin_dir, "setsid", 'exec "$@"')
    stub(bin_dir, "nohup", 'exec "$@"')
    stub(bin_dir, "sleep", "exit 0")
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "DOCKERD_LOG": str(tmp_path / "dockerd.log"),
            "DOCKERD_WAIT": "5",
            **env,
        },
    )
    assert "starting dockerd" in done.stderr, done.stderr
    for _ in range(50):  # dockerd's stand-in runs in the background
        if record.exists() and record.read_text():
            break
        subprocess.run(["/bin/sleep", "0.1"], check=True)
    return record.read_text().split()


def test_no_userland_proxy_when_iptables_works(tmp_path: Path) -> None:
    flags = dockerd_flags(tmp_path, iptables_works=True)
    assert "--userland-proxy=false" in flags
    assert "--iptables=false" not in flags


def test_the_proxy_stays_when_asked(tmp_path: Path) -> None:
    flags = dockerd_flags(tmp_path, iptables_works=True, DOCKERD_USERLAND_PROXY="true")
    assert "--userland-proxy=false" not in flags


def test_the_proxy_stays_without_iptables(tmp_path: Path) -> None:
    """Without iptables there is no NAT: the proxy is the only way to a published port."""
    flags = dockerd_flags(tmp_path, iptables_works=False)
    assert "--iptables=false" in flags
    assert "--userland-proxy=false" not in flags
