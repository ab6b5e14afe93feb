"""A hostile ``endpoints.json`` handed to ``EnvPool.from_deploy``: only http(s)/ws(s) URLs
with a host and no credentials get through, the file is read within a bound, never through
a link or from a FIFO, and every refusal names the file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from openenv_runtime import GenericEnvClient
from openenv_runtime.client.endpoints import ENDPOINTS_FILE, MAX_BYTES, EndpointsError
from openenv_runtime.client.pool import EnvPool


def pool_from(folder: Path) -> EnvPool[GenericEnvClient]:
    return EnvPool.from_deploy(folder, GenericEnvClient, size=1)


def write(folder: Path, data: Any) -> Path:
    (folder / ENDPOINTS_FILE).write_text(data if isinstance(data, str) else json.dumps(data))
    return folder


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "ftp://10.0.0.4/",
        "unix:///var/run/docker.sock",
        "http://user:secret@10.0.0.4:8000",  # credentials would travel in every request
        "http://10.0.0.4:8000/?token=x",
        "http://10.0.0.4:8000/#x",
        "http://10.0.0.4:99999",
        "http://10.0.0.4:8000/\nX-Injected: 1",
        "http:///nohost",
        "",
        42,
        None,
    ],
)
def test_only_plain_web_urls_pass(tmp_path: Path, url: object) -> None:
    write(tmp_path, {"version": 1, "target": "slurm", "front": None, "replicas": [url]})
    with pytest.raises(EndpointsError, match=rf"{ENDPOINTS_FILE}: replicas\[0\]"):
        pool_from(tmp_path)
    write(tmp_path, {"version": 1, "target": "slurm", "front": url})
    if url is None:  # no front is allowed; then there is nothing to connect to
        with pytest.raises(EndpointsError, match="No front or replicas"):
            pool_from(tmp_path)
    else:
        with pytest.raises(EndpointsError, match=rf"{ENDPOINTS_FILE}: front"):
            pool_from(tmp_path)


@pytest.mark.parametrize(
    "data",
    [
        "[1, 2]",
        "not json",
        {"version": 2, "target": "slurm"},
        {"version": 1, "target": "slurm", "front": "http://a:1", "extra": "x"},
        {"version": 1, "target": "../../etc", "front": "http://a:1"},
        {"version": 1, "target": "slurm", "replicas": "http://a:1"},
        {"version": 1, "target": "slurm", "replicas": ["http://a:1"] * 10_001},
    ],
)
def test_anything_but_the_written_shape_is_refused(tmp_path: Path, data: Any) -> None:
    write(tmp_path, data)
    with pytest.raises(EndpointsError, match=ENDPOINTS_FILE):
        pool_from(tmp_path)


def test_a_huge_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    with (tmp_path / ENDPOINTS_FILE).open("wb") as file:
        file.truncate(MAX_BYTES * 64)
    with pytest.raises(EndpointsError, match=f"larger than {MAX_BYTES} bytes"):
        pool_from(tmp_path)


def test_a_link_or_a_fifo_is_refused(tmp_path: Path) -> None:
    elsewhere = write(tmp_path, {"version": 1, "target": "slurm", "front": "http://a:1"})
    linked = tmp_path / "deploy"
    linked.mkdir()
    (linked / ENDPOINTS_FILE).symlink_to(elsewhere / ENDPOINTS_FILE)
    with pytest.raises(EndpointsError, match="a link is refused"):
        pool_from(linked)
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / ENDPOINTS_FILE)
    with pytest.raises(EndpointsError, match="not a regular file"):
        pool_from(fifo)  # returns at once: no writer is waited for
