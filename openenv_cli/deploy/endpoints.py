"""Where a deploy's replicas answer: ``DIR/endpoints.txt``, one ``host:port`` a line.

``openenv deploy`` writes it into its ``--out`` folder whenever it knows the replicas: the
``--backend`` servers of ``envoy``, and after ``--apply`` the tasks of a Swarm stack or a
Slurm job. A Slurm job also writes its own ``openenv-run-JOB/endpoints.txt``, which counts
when ``DIR/endpoints.txt`` is absent (a script submitted with ``sbatch`` by hand). The same
format as a ``--backend`` file, read by the same parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from openenv_cli.deploy.backends import Backend, parse_backend_lines
from openenv_cli.errors import UsageError
from openenv_cli.safe_files import read_inside, write_inside

ENDPOINTS = "endpoints.txt"
RUN_FOLDERS = "openenv-run-*"  # a Slurm job's own folder (templates/deploy/slurm)


def write_endpoints(out: Path, endpoints: Sequence[str | Backend]) -> None:
    """Record ``endpoints`` (``host:port``) in ``out/endpoints.txt``, never through a link."""
    write_inside(out, ENDPOINTS, "".join(f"{e}\n" for e in endpoints))


def read_endpoints(out: Path) -> list[Backend]:
    """The replicas ``openenv deploy`` recorded in ``out``; raises :class:`UsageError` when it
    recorded none."""
    candidates = [ENDPOINTS]
    if out.is_dir():
        runs = sorted(out.glob(RUN_FOLDERS), key=lambda p: p.stat().st_mtime, reverse=True)
        candidates += [f"{run.name}/{ENDPOINTS}" for run in runs if run.is_dir()]
    for relative in candidates:
        try:
            text = read_inside(out, relative).decode("utf-8")
        except (FileNotFoundError, NotADirectoryError):
            continue
        except UnicodeDecodeError:
            raise UsageError(
                f"{out / relative} is not text.", hint="It should list one host:port a line."
            ) from None
        try:
            found = parse_backend_lines(text)
        except UsageError as error:
            raise UsageError(
                f"{out / relative}: {error.message}",
                hint="Each line is one replica's host:port, e.g. 10.0.0.5:8000 (# starts a comment).",
            ) from None
        if found:
            return found
    raise UsageError(
        f"{out} records no replica endpoints ({ENDPOINTS}).",
        hint="openenv deploy writes it for envoy (--backend) and after --apply (swarm, slurm); "
        "for Kubernetes pass the replicas' URLs (e.g. through kubectl port-forward), or write "
        f"{out / ENDPOINTS} yourself, one host:port a line.",
    )
