"""The typed outcome of validation: one :class:`CheckResult` per check, gathered in a :class:`Report`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


def one_period(text: str) -> str:
    """``text`` without a doubled final period (an ellipsis stays)."""
    if text.endswith("..") and not text.endswith("..."):
        return text[:-1]
    return text


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    """One check: a stable ``name``, its status, what was found and (for warn/fail) how to fix it."""

    name: str
    status: Status
    message: str
    fix: str | None = None
    file: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Messages end "...: {exc}." and an exception's own text may end with a period.
        object.__setattr__(self, "message", one_period(self.message))
        if self.fix is not None:
            object.__setattr__(self, "fix", one_period(self.fix))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "message": self.message,
            "fix": self.fix,
            "file": self.file,
            "details": self.details,
        }


def passed(name: str, message: str, **kw: Any) -> CheckResult:
    return CheckResult(name, Status.PASS, message, **kw)


def warned(name: str, message: str, fix: str | None = None, **kw: Any) -> CheckResult:
    return CheckResult(name, Status.WARN, message, fix, **kw)


def failed(name: str, message: str, fix: str | None = None, **kw: Any) -> CheckResult:
    return CheckResult(name, Status.FAIL, message, fix, **kw)


def skipped(name: str, message: str, **kw: Any) -> CheckResult:
    return CheckResult(name, Status.SKIP, message, **kw)


@dataclass
class Report:
    """All checks of one run. ``ok`` is True when nothing failed (warnings are fine)."""

    target: str
    checks: list[CheckResult] = field(default_factory=list)

    def add(self, *results: CheckResult) -> None:
        self.checks.extend(results)

    @property
    def ok(self) -> bool:
        return not any(c.status is Status.FAIL for c in self.checks)

    def counts(self) -> dict[str, int]:
        return {s.value: sum(1 for c in self.checks if c.status is s) for s in Status}

    def get(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "ok": self.ok,
            "summary": self.counts(),
            "checks": [c.to_json() for c in self.checks],
        }
