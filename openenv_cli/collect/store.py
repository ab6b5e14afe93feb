"""A collection on disk: shards written as episodes finish, resume, provenance, card.

Layout of the output folder::

    run.json                 options fingerprint + provenance (written first)
    data/shard-00000.parquet episodes (or .jsonl), each shard complete or absent
    README.md                the dataset card (front matter for the Hub)

Every file is written through :mod:`openenv_cli.safe_files` (a temporary name created
exclusively, flushed to disk and renamed; never through a link planted in the folder), so
a kill at any moment (SIGKILL included) leaves whole shards only; ``--resume`` reads the
episode ids in them and runs the rest. A new run writes nothing before its first shard. Every row carries its ``episode_id``, so duplicates cannot hide.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from openenv_cli.errors import OpenEnvError, UsageError
from openenv_cli.safe_files import UnsafePathError, ensure_folder, read_inside, replacing

from .spec import SCHEMA_VERSION, CollectSpec

RUN_FILE = "run.json"
CARD_FILE = "README.md"
DATA_DIR = "data"
TOKEN_FIELDS = ("prompt_ids", "completion_ids", "logprobs", "env_mask")


def _arrow_schema(tokens: bool) -> Any:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    fields = [
        ("schema_version", pa.int32()),
        ("episode_id", pa.string()),
        ("group_id", pa.string()),
        ("seed", pa.int64()),
        ("task_id", pa.string()),
        ("messages", pa.list_(message)),
        ("actions", pa.list_(pa.string())),
        ("observations", pa.list_(pa.string())),
        ("rewards", pa.list_(pa.float64())),
        ("total_reward", pa.float64()),
        ("num_steps", pa.int32()),
        ("done", pa.bool_()),
        ("truncated", pa.bool_()),
        ("error", pa.string()),
        ("error_kind", pa.string()),
        ("invalid_actions", pa.int32()),
        ("duration_s", pa.float64()),
        ("env_latencies_s", pa.list_(pa.float64())),
        ("model_latencies_s", pa.list_(pa.float64())),
    ]
    if tokens:
        fields += [
            ("prompt_ids", pa.list_(pa.int64())),
            ("completion_ids", pa.list_(pa.int64())),
            ("logprobs", pa.list_(pa.float64())),
            ("env_mask", pa.list_(pa.int8())),
            ("token_drift", pa.bool_()),
        ]
    return pa.schema(fields)


class Store:
    """The output folder of one run."""

    def __init__(self, out: Path, spec: CollectSpec) -> None:
        self.out = out
        self.spec = spec
        self.data = out / DATA_DIR
        self._suffix = ".parquet" if spec.format == "parquet" else ".jsonl"
        self._next_shard = 0
        self.started = False
        self.provenance: dict[str, Any] = {}

    # -- opening ---------------------------------------------------------------------------
    def open(self, resume: bool, provenance: dict[str, Any]) -> set[str]:
        """Check the folder; returns the episode ids already written (empty when new).

        A new run writes nothing here: its folder and run record appear with its first shard
        (:meth:`start`), so a run that fails before writing one leaves no trace, and the
        corrected command runs without ``--resume``.
        """
        record = read_run(self.out) if os.path.lexists(self.out / RUN_FILE) else None
        self.provenance = provenance
        if record is None:
            if self.out.exists() and any(self.out.iterdir()):
                raise UsageError(
                    f"{self.out} is not empty and holds no collection (no {RUN_FILE}).",
                    hint="Choose an empty or new --out folder.",
                )
            self.started = False
            return set()
        if not resume:
            raise UsageError(
                f"{self.out} already holds a collection.",
                hint="Add --resume to finish it, or choose another --out.",
            )
        self._check_same_run(record)
        self.provenance = record.get("provenance") or provenance  # the run's, as first recorded
        ensure_folder(self.out, DATA_DIR)
        for leftover in self.data.glob("*.tmp"):  # a shard being written when the run died
            leftover.unlink()
        self.started = True
        return self.episode_ids()

    def start(self) -> None:
        """Create the folder and write the run record (once, before the first shard)."""
        if self.started:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        ensure_folder(self.out, DATA_DIR)
        record = {
            "schema_version": SCHEMA_VERSION,
            "fingerprint": self.spec.fingerprint(),
            "options": self.spec.fingerprint_fields(),
            "provenance": self.provenance,
        }
        with _writing(self.out, RUN_FILE) as out:
            out.write(json.dumps(record, indent=2, sort_keys=True).encode())
        self.started = True

    def _check_same_run(self, record: dict[str, Any]) -> None:
        if record.get("fingerprint") == self.spec.fingerprint():
            return
        before = record.get("options", {})
        now = self.spec.fingerprint_fields()
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        detail = ", ".join(f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in changed)
        raise UsageError(
            f"--resume with different options than the run in {self.out} ({detail}).",
            hint="Resume with the same options, or start a new run in another --out.",
        )

    # -- reading ---------------------------------------------------------------------------
    def shards(self) -> list[Path]:
        return sorted(self.data.glob(f"shard-*{self._suffix}"))

    def episode_ids(self) -> set[str]:
        """Ids of every episode on disk; refuses a folder where one appears twice."""
        seen: set[str] = set()
        for row in read_rows(self.out, columns=["episode_id"]):
            if row["episode_id"] in seen:
                raise OpenEnvError(
                    f"episode {row['episode_id']} appears twice in {self.data}",
                    hint="The folder was edited or mixes two runs; collect into a new --out.",
                )
            seen.add(row["episode_id"])
        shards = self.shards()
        self._next_shard = int(shards[-1].name.split("-")[1].split(".")[0]) + 1 if shards else 0
        return seen

    # -- writing ---------------------------------------------------------------------------
    def write_shard(self, rows: list[dict[str, Any]]) -> Path:
        """Write ``rows`` as one whole shard (temporary name, fsync, rename)."""
        self.start()
        name = f"shard-{self._next_shard:05d}{self._suffix}"
        self._next_shard += 1
        if not self.spec.tokens:
            rows = [
                {k: v for k, v in r.items() if k not in (*TOKEN_FIELDS, "token_drift")}
                for r in rows
            ]
        if self.spec.format == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pylist(rows, schema=_arrow_schema(self.spec.tokens))
            with _writing(self.out, f"{DATA_DIR}/{name}") as out:
                pq.write_table(table, out, compression="zstd")
        else:
            with _writing(self.out, f"{DATA_DIR}/{name}") as out:
                for r in rows:
                    out.write(json.dumps(r, sort_keys=True).encode() + b"\n")
        return self.data / name

    def summary(self) -> dict[str, Any]:
        """Counts and mean total reward over every row on disk (whichever run wrote it)."""
        episodes = errors = 0
        reward = 0.0
        for row in read_rows(self.out, columns=["total_reward", "error"]):
            episodes += 1
            errors += bool(row["error"])
            reward += float(row["total_reward"])
        return {
            "episodes": episodes,
            "mean_reward": reward / episodes if episodes else 0.0,
            "errors": errors,
        }

    def write_card(self) -> dict[str, Any]:
        """The dataset card from the rows on disk; returns their summary."""
        from .card import render_card

        summary = self.summary()
        with _writing(self.out, CARD_FILE) as out:
            out.write(render_card(self.spec, self.provenance, summary).encode())
        return summary


def read_rows(out: Path, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Every row of a collection folder (Parquet or JSON lines shards); a shard or ``data``
    folder that is a symbolic link is refused (its rows would be another folder's, and a
    push would upload what it points to)."""
    data = out / DATA_DIR
    if data.is_symlink():
        raise UnsafePathError(out, DATA_DIR, "is a symbolic link")
    for path in sorted(data.glob("shard-*.parquet")):
        import pyarrow.parquet as pq

        _refuse_link(out, path)
        yield from pq.read_table(path, columns=columns).to_pylist()
    for path in sorted(data.glob("shard-*.jsonl")):
        _refuse_link(out, path)
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                yield {k: row[k] for k in columns} if columns else row


def _refuse_link(out: Path, shard: Path) -> None:
    if shard.is_symlink():
        raise UnsafePathError(out, f"{DATA_DIR}/{shard.name}", "is a symbolic link")


def read_run(out: Path) -> dict[str, Any]:
    """The run record of the collection in ``out`` (never read through a link)."""
    try:
        record = json.loads(read_inside(out, RUN_FILE))
    except FileNotFoundError:
        raise UsageError(
            f"{out} holds no collection ({RUN_FILE} is missing).",
            hint="Point at the --out folder of openenv collect or openenv eval.",
        ) from None
    except ValueError as error:
        raise OpenEnvError(
            f"{out / RUN_FILE} is not a run record: {error}.",
            hint="The folder was edited or is not a collection; collect into a new --out.",
        ) from None
    if not isinstance(record, dict):
        raise OpenEnvError(
            f"{out / RUN_FILE} is not a run record.",
            hint="The folder was edited or is not a collection; collect into a new --out.",
        )
    return record


@contextlib.contextmanager
def _writing(out: Path, relative: str) -> Iterator[BinaryIO]:
    """``safe_files.replacing``, with a full disk told as what to do next."""
    try:
        with replacing(out, relative) as handle:
            yield handle
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise OpenEnvError(
                f"the disk is full: could not write {relative}",
                hint="Free space, then run again with --resume: written shards are kept, "
                "the unwritten episodes run again.",
            ) from None
        raise
