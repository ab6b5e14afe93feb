"""``/metrics``: what one server did and holds, in the Prometheus text format.

Counting a step must cost the WebSocket hot path next to nothing, and ``prometheus_client``'s
own metric objects take a lock (and, in multiprocess mode, write a memory-mapped file) on
every increment: several microseconds, measured, against the few microseconds of a cheap step.
So each worker keeps its counts as plain integers in a :class:`Tally` (an increment on the
event loop's thread), and exports them when asked:

* one worker: a collector builds the metric families from the tally and the session registry
  at scrape time, so every scrape is exact;
* several workers (``--workers N``): the launcher gives the workers a private folder
  (``PROMETHEUS_MULTIPROC_DIR``, 0700, removed at exit); each worker writes its totals there
  every :data:`FLUSH_INTERVAL` seconds and before it answers a scrape, in
  ``prometheus_client``'s multiprocess files, and ``/metrics`` on any worker sums every
  worker's files with ``prometheus_client.multiprocess.MultiProcessCollector``: each worker
  shows the whole server's totals, the others' as of their last write (at most
  :data:`FLUSH_INTERVAL` old).

Gauges (sessions open now, warm instances, stuck threads, code-mode queue) are read from the
registry when exported, never kept up to date on the way.
"""

from __future__ import annotations

import asyncio
import glob
import os
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass
from math import fsum
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from openenv_runtime._version import __version__
from openenv_runtime.mcp import code_mode

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable: the folder of the workers' metric files (multiprocess mode)."""
FLUSH_INTERVAL = 1.0
"""Seconds between two writes of a worker's totals to the shared folder."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
"""Upper bounds (seconds) of the step and reset latency histograms: a cheap inline step
takes tens of microseconds, an LLM-judged one seconds."""
_FILE_TAG = "openenv"  # our files' names end in -openenv.db: an environment's own metrics may share the folder


class Sessions(Protocol):
    """What the exporter reads of a worker's session registry (``sessions.SessionManager``)."""

    @property
    def sessions(self) -> Mapping[str, Any]: ...
    @property
    def detached(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def warm(self) -> Sized: ...
    @property
    def abandoned(self) -> int: ...
    @property
    def runner(self) -> Any: ...


class Latency:
    """A histogram as plain numbers: the count per bucket (the last one +Inf) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.total += seconds

    def fold(self, pending: list[float]) -> None:
        """Add ``pending``'s observations (emptied): sorted once, each bucket is one search,
        far cheaper per observation than a search each (sorting floats is C's fast path)."""
        if not pending:
            return
        pending.sort()
        below = 0
        counts = self.counts
        for i, bound in enumerate(LATENCY_BUCKETS):
            upto = bisect_right(pending, bound, below)  # le: at most the bound
            counts[i] += upto - below
            below = upto
        counts[-1] += len(pending) - below
        self.total += fsum(pending)
        pending.clear()

    def cumulative(self) -> list[tuple[str, float]]:
        """The buckets as Prometheus writes them: (``le``, observations at most that)."""
        out, running = [], 0
        for bound, count in zip((*LATENCY_BUCKETS, float("inf")), self.counts, strict=True):
            running += count
            out.append((floatToGoString(bound), float(running)))
        return out


# What the hot path counts a step under: an index into Tally.steps, whose labels are
# STEP_LABELS[index]. A list index costs a third of a tuple-keyed dict's (the tuple is hashed
# on every lookup), measured.
OUTCOMES = ("ok", "done", "invalid", "error", "timeout")
TRANSPORTS = ("ws", "http", "vector", "mcp")
"""The ways in a step is counted under: a WebSocket session, ``POST /step``, one environment of
a vector session, an MCP tool answered by ``step()`` (``tools/list``, ``tools/call``)."""
STEP_LABELS = tuple((transport, outcome) for transport in TRANSPORTS for outcome in OUTCOMES)
WS_OK, WS_DONE, WS_INVALID, WS_ERROR, WS_TIMEOUT = range(5)
HTTP_OK, HTTP_DONE, HTTP_INVALID, HTTP_ERROR, HTTP_TIMEOUT = range(5, 10)
VECTOR_OK, VECTOR_DONE, VECTOR_INVALID, VECTOR_ERROR, VECTOR_TIMEOUT = range(10, 15)
MCP_OK, MCP_DONE, MCP_INVALID, MCP_ERROR, MCP_TIMEOUT = range(15, 20)
REFUSALS = ("capacity", "client_cap", "draining")
PENDING_MAX = 4096
"""Step times a tally holds before it folds them into its histogram (32 KiB of pointers)."""


class Tally:
    """One worker's counts since it started: plain integers, added to on the event loop."""

    __slots__ = (
        "checkpoint_bytes",
        "checkpoints",
        "closed",
        "inline_steps",
        "opened",
        "pending",
        "refused",
        "reset_latency",
        "resets",
        "resumed",
        "step_latency",
        "steps",
        "warm",
    )  # fmt: skip

    def __init__(self) -> None:
        self.steps = [0] * len(STEP_LABELS)  # by index: WS_OK, ..., MCP_TIMEOUT
        self.step_latency = Latency()
        # step times not yet in step_latency's buckets: appending costs a tenth of a bucket
        # search (measured); folded once PENDING_MAX accumulate and whenever read (settle).
        self.pending: list[float] = []
        self.inline_steps = 0  # answered in the WebSocket protocol, without the ASGI trip
        self.resets: Counter[tuple[str, ...]] = Counter()  # (transport, outcome)
        self.reset_latency = Latency()
        self.opened: Counter[tuple[str, ...]] = Counter()  # (transport,)
        self.closed: Counter[tuple[str, ...]] = Counter()  # (transport, reason)
        self.refused: Counter[tuple[str, ...]] = Counter({(r,): 0 for r in REFUSALS})
        self.resumed = 0
        self.warm: Counter[tuple[str, ...]] = Counter()  # (hit|miss,)
        self.checkpoints: Counter[tuple[str, ...]] = Counter()  # (taken|restored,)
        self.checkpoint_bytes = 0

    def step(self, key: int, seconds: float) -> None:
        """One step answered, under ``key`` (e.g. :data:`WS_OK`), that took ``seconds``."""
        self.steps[key] += 1
        pending = self.pending
        pending.append(seconds)
        if len(pending) >= PENDING_MAX:
            self.step_latency.fold(pending)

    def settle(self) -> None:
        """Fold the pending step times into the histogram (before the tally is read)."""
        self.step_latency.fold(self.pending)

    def reset(self, transport: str, ok: bool, seconds: float) -> None:
        self.resets[transport, "ok" if ok else "error"] += 1
        self.reset_latency.observe(seconds)


@dataclass(frozen=True, slots=True)
class Series:
    """One metric's values by label values; ``kind`` is counter, gauge or histogram."""

    kind: str
    name: str
    help: str
    labels: tuple[str, ...]
    values: Mapping[tuple[str, ...], Any]  # a number, or a Latency for a histogram


def _one(value: Any) -> dict[tuple[str, ...], Any]:
    return {(): value}


def series(tally: Tally, manager: Sessions | None = None) -> list[Series]:
    """Everything ``/metrics`` reports for one worker: ``tally``'s counts and, when given, what
    ``manager`` (its sessions, runner and code-mode slots) holds now."""
    tally.settle()
    out = [
        Series("counter", "openenv_steps", "Steps answered, by transport (ws, http, vector: "
               "one environment of a vector session, mcp: a tool answered by step()) and "
               "outcome (ok, done: the episode ended, invalid: action refused, error, timeout).",
               ("transport", "outcome"), dict(zip(STEP_LABELS, tally.steps, strict=True))),
        Series("histogram", "openenv_step_duration_seconds",
               "Server time of one valid step: validation, the environment's step, the reply.",
               (), _one(tally.step_latency)),
        Series("counter", "openenv_inline_steps", "WebSocket steps answered in the protocol "
               "itself, below ASGI (the rest of openenv_steps_total{transport=\"ws\"} took the "
               "ASGI path).", (), _one(tally.inline_steps)),
        Series("counter", "openenv_resets", "Resets (new episodes), by transport and outcome.",
               ("transport", "outcome"), dict(tally.resets)),
        Series("histogram", "openenv_reset_duration_seconds", "Server time of one reset.",
               (), _one(tally.reset_latency)),
        Series("counter", "openenv_sessions_opened", "Sessions given a slot, by transport "
               "(ws, http, call: a short-lived instance for /metadata, MCP or a task route).",
               ("transport",), dict(tally.opened)),
        Series("counter", "openenv_sessions_closed", "Sessions ended, by transport and reason "
               "(client, idle, resume_expired, drain, shutdown, step_timeout, factory_error).",
               ("transport", "reason"), dict(tally.closed)),
        Series("counter", "openenv_sessions_refused", "Sessions refused (never opened), by "
               "reason (capacity, client_cap, draining).", ("reason",), dict(tally.refused)),
        Series("counter", "openenv_sessions_resumed", "Dropped WebSocket sessions taken back "
               "by a resuming connection.", (), _one(tally.resumed)),
        Series("counter", "openenv_warm_pool", "Instances a new session needed, by where they "
               "came from (hit: the warm pool, miss: created then).", ("result",),
               dict(tally.warm)),
        Series("counter", "openenv_checkpoints", "Checkpoints taken and restored.",
               ("operation",), dict(tally.checkpoints)),
        Series("counter", "openenv_checkpoint_bytes", "Bytes of the checkpoints taken.",
               (), _one(tally.checkpoint_bytes)),
    ]  # fmt: skip
    if manager is not None:
        by_kind = Counter(s.kind for s in manager.sessions.values())
        runner, slots = manager.runner, code_mode.slots
        out += [
            Series("gauge", "openenv_workers", "Worker processes serving, by runtime version.",
                   ("version",), {(__version__,): 1}),
            Series("gauge", "openenv_sessions_active", "Sessions holding a slot now, by "
                   "transport.", ("transport",),
                   {(k,): by_kind.get(k, 0) for k in ("ws", "http", "call")}),
            Series("gauge", "openenv_sessions_detached", "Dropped WebSocket sessions waiting "
                   "to be resumed.", (), _one(manager.detached)),
            Series("gauge", "openenv_sessions_capacity", "Sessions the server holds at most "
                   "(every worker's).", (), _one(manager.capacity)),
            Series("gauge", "openenv_warm_instances", "Instances created ahead of demand, "
                   "waiting.", (), _one(len(manager.warm))),
            Series("gauge", "openenv_stuck_threads", "Environment threads still running a "
                   "call that overran the step timeout.", (), _one(runner.stuck_threads)),
            Series("counter", "openenv_steps_abandoned", "Sessions ended because a call "
                   "overran the step timeout (its instance left to finish).", (),
                   _one(manager.abandoned)),
            Series("gauge", "openenv_code_runs_running", "Code-mode runs holding a worker "
                   "slot.", (), _one(slots.running)),
            Series("gauge", "openenv_code_runs_queued", "Code-mode runs waiting for a worker "
                   "slot.", (), _one(slots.queued())),
            Series("counter", "openenv_code_runs", "Code-mode runs by whether they got a "
                   "worker slot (granted) or waited past CODE_WAIT_TIMEOUT (refused), this "
                   "worker's since start.", ("result",),
                   {("granted",): slots.granted_runs, ("refused",): slots.refused_runs}),
            Series("counter", "openenv_code_run_wait_seconds", "Seconds granted code-mode "
                   "runs waited for their slot, in all (÷ openenv_code_runs_total{result="
                   "\"granted\"}: the mean wait).", (), _one(slots.wait_seconds)),
        ]  # fmt: skip
    return out


def families(items: Iterable[Series]) -> Iterator[Metric]:
    """The Prometheus metric families of ``items`` (one worker's view)."""
    for item in items:
        family: Any
        if item.kind == "counter":
            family = CounterMetricFamily(item.name, item.help, labels=item.labels)
        elif item.kind == "gauge":
            family = GaugeMetricFamily(item.name, item.help, labels=item.labels)
        else:
            family = HistogramMetricFamily(item.name, item.help, labels=item.labels)
        for labels, value in item.values.items():
            if isinstance(value, Latency):
                family.add_metric(list(labels), value.cumulative(), value.total)
            else:
                family.add_metric(list(labels), value)
        yield family


class _Local(Collector):
    def __init__(self, tally: Tally, manager: Sessions) -> None:
        self.tally, self.manager = tally, manager

    def collect(self) -> Iterator[Metric]:
        return families(series(self.tally, self.manager))


class Exporter:
    """``/metrics`` of one worker: its own numbers, or with a shared folder, every worker's."""

    def __init__(self, tally: Tally, manager: Sessions, folder: str | None = None) -> None:
        self.tally, self.manager = tally, manager
        self.folder = folder
        self.registry = CollectorRegistry(auto_describe=False)
        self._files: dict[str, MmapedDict] = {}
        if folder is None:
            self.registry.register(_Local(tally, manager))
        else:
            MultiProcessCollector(self.registry, path=folder)

    def render(self) -> bytes:
        """The text ``/metrics`` answers (this worker's totals written first)."""
        self.flush()
        return generate_latest(self.registry)

    def flush(self) -> None:
        """Write this worker's totals to its files in the shared folder (no folder: nothing)."""
        if self.folder is None:
            return
        for item in series(self.tally, self.manager):
            # gauges: summed over live workers (a dead one's file is removed: forget_worker)
            kind = "gauge_livesum" if item.kind == "gauge" else item.kind
            file = self._file(kind)
            for labels, value in item.values.items():
                names = list(item.labels)
                if isinstance(value, Latency):
                    bounds = (*LATENCY_BUCKETS, float("inf"))
                    for bound, count in zip(bounds, value.counts, strict=True):
                        key = mmap_key(
                            item.name,
                            item.name + "_bucket",
                            [*names, "le"],
                            [*labels, floatToGoString(bound)],
                            item.help,
                        )
                        file.write_value(key, float(count), 0.0)
                    key = mmap_key(item.name, item.name + "_sum", names, list(labels), item.help)
                    file.write_value(key, value.total, 0.0)
                    continue
                sample = item.name + "_total" if item.kind == "counter" else item.name
                key = mmap_key(item.name, sample, names, list(labels), item.help)
                file.write_value(key, float(value), 0.0)

    def _file(self, kind: str) -> MmapedDict:
        file = self._files.get(kind)
        if file is None:
            assert self.folder is not None
            name = f"{kind}_{os.getpid()}-{_FILE_TAG}.db"
            file = self._files[kind] = MmapedDict(str(Path(self.folder) / name))
        return file

    async def flush_forever(self) -> None:
        """Write the totals every :data:`FLUSH_INTERVAL` seconds (run as a task; cancel it)."""
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            self.flush()

    def close(self) -> None:
        for file in self._files.values():
            file.close()
        self._files.clear()


def forget_worker(folder: str, pid: int) -> None:
    """A worker died: drop its gauges (sessions it held are gone); its counts stay in the totals.
    An environment's own live gauges in the folder go too (prometheus_client's bookkeeping)."""
    mark_process_dead(pid, folder)
    for path in glob.glob(os.path.join(glob.escape(folder), f"gauge_*_{pid}-{_FILE_TAG}.db")):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
