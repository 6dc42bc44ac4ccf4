"""The step runner every workflow uses: journal and events around each step.

``async with WorkflowRun(ctx, kind, target) as run:`` writes ``begin``; each
``await run.step(name, target, action, fn)`` writes the ``intent`` (fsynced)
before ``fn`` runs and the ``outcome`` after; leaving the block writes ``end``
and releases the run's locks, whatever happened.

Obligations: a step that leaves the cluster in a state that must not last
(a plug turned off) registers an obligation (``run.owe``) until a later step
settles it (``run.settle``). A workflow that fails or is cancelled with an
obligation open writes *no* ``end``: it stays unfinished in the journal and is
offered at the next start, exactly like one killed by a crash.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sparktui.core.errors import describe_error
from sparktui.ops.context import OpsContext
from sparktui.ops.events import (
    GuardsEvaluated,
    StepFinished,
    StepProgressed,
    StepStarted,
    WorkflowFinished,
    WorkflowStarted,
)
from sparktui.ops.guards import GuardReport, Verdict
from sparktui.ops.journal import new_workflow_id
from sparktui.ops.plan import PlannedStep
from sparktui.ops.runlocks import LockHeld, RunLock, format_age, process_started

T = TypeVar("T")


class StepFailed(Exception):
    def __init__(self, step: str, target: str, message: str) -> None:
        self.step = step
        self.target = target
        self.message = message
        super().__init__(f"{step} [{target}]: {message}")


class Refused(Exception):
    """The guards refused the workflow; nothing was done."""

    def __init__(self, report: GuardReport) -> None:
        self.report = report
        super().__init__("; ".join(v.message for v in report.refused))


@dataclass
class WorkflowResult:
    wf: str
    kind: str
    target: str
    ok: bool
    message: str
    detail: dict[str, Any] = field(default_factory=dict)
    report: GuardReport | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"wf": self.wf, "workflow": self.kind, "target": self.target,
                               "ok": self.ok, "message": self.message, "detail": self.detail}
        if self.report is not None:
            out["guards"] = self.report.to_json()
        return out


class WorkflowRun:
    def __init__(self, ctx: OpsContext, kind: str, target: str, *,
                 plan: Sequence[PlannedStep] = (), detail: Mapping[str, Any] | None = None,
                 wf: str | None = None) -> None:
        self.ctx = ctx
        self.kind = kind
        self.target = target
        self.plan = list(plan)
        self.detail = dict(detail or {})
        self.wf = wf or new_workflow_id(kind, ctx.clock)
        self.obligations: dict[str, str] = {}
        self.result: WorkflowResult | None = None
        self.report: GuardReport | None = None
        """The verdicts the run enforced (set by `guards`)."""
        self._locked: list[str] = []

    # -- lifecycle --------------------------------------------------------------
    async def __aenter__(self) -> WorkflowRun:
        detail = {**self.detail, "plan": [p.to_json() for p in self.plan], "pid": os.getpid(),
                  "pid_started": process_started(os.getpid())}
        self.ctx.journal.append(self.wf, "begin", workflow=self.kind, target=self.target,
                                detail=detail)
        self.ctx.emit(WorkflowStarted(self.wf, self.ctx.clock.time(), self.kind, self.target,
                                      tuple(p.describe() for p in self.plan)))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: object) -> bool:
        try:
            if exc is None:
                if self.result is None:
                    self.finish(True, "done")
            elif self.obligations:
                owed = "; ".join(self.obligations.values())
                self.ctx.journal.append(self.wf, "note", workflow=self.kind, target=self.target,
                                        message=f"left unfinished: {owed}")
                self.result = WorkflowResult(self.wf, self.kind, self.target, False,
                                             f"{_why(exc)}; UNFINISHED: {owed}",
                                             {"unfinished": list(self.obligations.values())},
                                             self.report)
                self._emit_finished()
            elif self.result is None:
                self.finish(False, _why(exc))
        finally:
            if self._locked:
                self.ctx.locks.release(self.wf)
        # a failed step or a refusal is reported in self.result; anything else propagates
        return isinstance(exc, StepFailed | Refused)

    def finish(self, ok: bool, message: str, detail: Mapping[str, Any] | None = None) -> None:
        self.result = WorkflowResult(self.wf, self.kind, self.target, ok, message,
                                     dict(detail or {}), self.report)
        self.ctx.journal.append(self.wf, "end", workflow=self.kind, target=self.target, ok=ok,
                                message=message, detail=dict(detail or {}))
        self._emit_finished()

    def _emit_finished(self) -> None:
        r = self.result
        assert r is not None
        self.ctx.emit(WorkflowFinished(self.wf, self.ctx.clock.time(), self.kind, self.target,
                                       r.ok, r.message, r.detail))

    # -- guards and locks ---------------------------------------------------------
    def guards(self, report: GuardReport) -> None:
        """Journal and emit the verdicts (every one: an incident bundle shows the
        verdicts that started a lane); raise Refused (handled by the block) if refused."""
        self.report = report
        self.ctx.journal.append(self.wf, "guards", workflow=self.kind, target=self.target,
                                detail={"verdicts": [v.to_json() for v in report.verdicts]})
        if report.overridden:
            self.ctx.journal.append(
                self.wf, "override", workflow=self.kind, target=self.target,
                detail={"overrides": sorted({v.override.value for v in report.overridden
                                             if v.override}),
                        "verdicts": [v.to_json() for v in report.overridden]})
        self.ctx.emit(GuardsEvaluated(
            self.wf, self.ctx.clock.time(),
            passed=tuple(v.message for v in report.verdicts if v.passed and not v.warning),
            refused=tuple(v.message for v in report.refused),
            overridden=tuple(v.message for v in report.overridden),
            warnings=tuple(v.message for v in report.warnings)))
        if not report.allowed:
            self.ctx.journal.append(self.wf, "refused", workflow=self.kind, target=self.target,
                                    detail={"verdicts": [v.to_json() for v in report.refused]})
            self.finish(False, "refused: " + "; ".join(v.message for v in report.refused),
                        {"refused": [v.to_json() for v in report.refused]})
            raise Refused(report)

    def lock(self, nodes: Sequence[str], containers: Mapping[str, Sequence[str]] | None = None
             ) -> None:
        """Take the nodes' run locks (a stale one, its owner gone, is taken over and
        journaled as such)."""
        def took_over(stale: RunLock, age: float | None) -> None:
            self.ctx.journal.append(
                self.wf, "note", workflow=self.kind, target=self.target,
                message=f"took over {stale.node}'s stale lock of {stale.describe()} (its "
                        f"process is gone" + (f", taken {format_age(age)} ago)" if age is not None
                                              else ")"))

        try:
            self.ctx.locks.acquire(nodes, wf=self.wf, workflow=self.kind, target=self.target,
                                   started_at=self.ctx.clock.time(), containers=containers,
                                   on_stale=took_over)
        except LockHeld as exc:  # taken between the guards and now
            held = exc.lock
            self.guards(GuardReport((Verdict(
                "runlock", held.node, False,
                f"{held.node} was locked by {held.describe()} after the guards ran: one "
                f"workflow per node -> wait for it"),)))
        self._locked = list(nodes)

    # -- steps ------------------------------------------------------------------
    def owe(self, key: str, what: str) -> None:
        self.obligations[key] = what

    def settle(self, key: str) -> None:
        self.obligations.pop(key, None)

    def progress(self, step: str, target: str, message: str) -> None:
        self.ctx.emit(StepProgressed(self.wf, self.ctx.clock.time(), step, target, message))

    async def step(self, step: str, target: str, action: str,
                   fn: Callable[[], Awaitable[T]],
                   describe: Callable[[T], str] | None = None,
                   detail: Callable[[T], Mapping[str, Any]] | None = None) -> T:
        j, clock = self.ctx.journal, self.ctx.clock
        j.append(self.wf, "intent", workflow=self.kind, target=target, step=step, action=action)
        self.ctx.emit(StepStarted(self.wf, clock.time(), step, target, action))
        t0 = clock.monotonic()
        try:
            value = await fn()
        except asyncio.CancelledError:
            j.append(self.wf, "outcome", target=target, step=step, ok=False, message="cancelled")
            self.ctx.emit(StepFinished(self.wf, clock.time(), step, target, False, "cancelled",
                                       clock.monotonic() - t0))
            raise
        except Exception as exc:
            message = _why(exc)
            j.append(self.wf, "outcome", target=target, step=step, ok=False, message=message)
            self.ctx.emit(StepFinished(self.wf, clock.time(), step, target, False, message,
                                       clock.monotonic() - t0))
            raise StepFailed(step, target, message) from exc
        message = describe(value) if describe else "ok"
        j.append(self.wf, "outcome", target=target, step=step, ok=True, message=message,
                 detail=dict(detail(value)) if detail else {})
        self.ctx.emit(StepFinished(self.wf, clock.time(), step, target, True, message,
                                   clock.monotonic() - t0))
        return value

    def outcome(self) -> WorkflowResult:
        assert self.result is not None, "the run block has not ended"
        return self.result


async def together(*steps: Awaitable[T]) -> list[T]:
    """Run steps concurrently and wait for all of them (none is left running);
    then raise the first failure, if any."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]


def _why(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return describe_error(exc)
