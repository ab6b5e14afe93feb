"""A ``RolloutService`` as the ``rollout_worker`` of TRL's ``AsyncGRPOTrainer``.

TRL (1.16, ``trl.experimental.async_grpo``) takes any object with ``RolloutWorkerProtocol``'s
members: ``rollout_buffer`` (a queue of ``RolloutSample``), ``metrics_queue``, ``start()``,
``stop()``, ``update_model_version(v)`` and ``check_health(stale_after_s)``. The trainer
pauses the vLLM server itself around its weight sync (vLLM keeps the requests in flight), then
calls ``update_model_version``; it drops samples more than its own ``max_staleness`` behind,
reading each sample's ``model_version``, here the version of its oldest turn.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from .service import RolloutService


class AsyncGRPOWorker:
    """``AsyncGRPOTrainer(..., rollout_worker=AsyncGRPOWorker(service))``.

    The service's groups become ``RolloutSample`` rows (one per episode) with the group's
    normalised advantage (reward minus the group's mean, over its standard deviation).
    ``start()`` starts the service (when not started yet) and a thread that fills
    ``rollout_buffer`` (at most ``queue_maxsize`` rows); ``stop()`` ends both.
    """

    def __init__(self, service: RolloutService, *, queue_maxsize: int = 1024) -> None:
        self.service = service
        self.rollout_buffer: queue.Queue[Any] = queue.Queue(maxsize=queue_maxsize)
        self.metrics_queue: queue.Queue[Any] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._heartbeat = time.monotonic()

    def start(self) -> None:
        if not self.service.started:
            self.service.__enter__()
        self._thread = threading.Thread(target=self._fill, name="openenv-grpo-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.service.close()

    def update_model_version(self, model_version: int) -> None:
        self.service.set_policy_version(model_version)

    def check_health(self, stale_after_s: float) -> None:
        if self._error is not None:
            raise RuntimeError("the rollout service stopped; see the cause") from self._error
        age = time.monotonic() - self._heartbeat
        if age > stale_after_s:
            raise RuntimeError(f"no group from the rollout service for {age:.0f}s")

    def _fill(self) -> None:
        group_id = 0
        while not self._stop.is_set():
            try:
                (group,) = self.service.get_batch(1, timeout=1.0)
            except TimeoutError:
                continue
            except BaseException as error:  # handed to the trainer by check_health
                self._error = error
                return
            self._heartbeat = time.monotonic()
            for row in rows(group, group_id):
                while not self._stop.is_set():
                    try:
                        self.rollout_buffer.put(row, timeout=1.0)
                        break
                    except queue.Full:
                        self._heartbeat = time.monotonic()  # the trainer is the slow side
            group_id += 1


def rows(group: list[dict[str, Any]], group_id: int) -> list[Any]:
    """One group's samples as TRL's ``RolloutSample`` rows."""
    import numpy as np
    from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

    rewards = np.array([s["env_reward"] for s in group], dtype=float)
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    out = []
    now = time.time()
    for sample, advantage in zip(group, advantages, strict=True):
        prompt_len = len(sample["prompt_ids"])
        messages = sample.get("messages") or []
        split = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), 0)
        versions = sample["policy_versions"]
        out.append(
            RolloutSample(
                prompt=messages[:split],
                completion=messages[split:],
                input_ids=np.asarray(sample["prompt_ids"] + sample["completion_ids"], np.int64),
                completion_mask=np.asarray([0] * prompt_len + sample["env_mask"], np.int64),
                old_log_probs=np.asarray([0.0] * prompt_len + sample["logprobs"], np.float32),
                advantage=float(advantage),
                model_version=min(versions) if versions else 0,
                group_id=group_id,
                metrics={"reward": float(sample["env_reward"])},
                enqueued_at=now,
            )
        )
    return out
