"""One plan per workflow: a pure function of what was observed.

Every workflow (serve, stop, power cycle/on/off, cluster power, recover,
resume, runlock close) is an object with ``needs(config)`` (what to observe),
``plan(state) -> Plan`` (the exact steps and every guard verdict, from one
`OpsState`) and ``run(run, plan)`` (the steps). The console's confirm modal,
the CLI's preview and ``--dry-run --json``, and the run itself all go through
``plan``: `ops/workflows/execute.py` observes, plans and, before the first step
that changes anything, observes and plans again and stops if a verdict or a step
changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sparktui.core.config import Config
from sparktui.core.state import ClusterSnapshot
from sparktui.ops.guards import GuardReport, Verdict
from sparktui.ops.journal import WorkflowRecord
from sparktui.ops.runlocks import RunLock

if TYPE_CHECKING:
    from sparktui.ops.workflows.runner import WorkflowRun


@dataclass(frozen=True)
class PlannedStep:
    """One line of "what will happen"."""

    step: str
    target: str
    action: str
    """The exact command, Home Assistant call or wait."""

    def to_json(self) -> dict[str, str]:
        return {"step": self.step, "target": self.target, "action": self.action}

    def describe(self) -> str:
        return f"{self.step} [{self.target}]: {self.action}"


@dataclass(frozen=True)
class Needs:
    """What a workflow's plan reads, besides the run locks and the journal (always)."""

    nodes: tuple[str, ...] = ()
    """Nodes to probe, all in one round."""
    switches: tuple[str, ...] = ()
    """Home Assistant entities whose state the guards read."""
    fingerprints: tuple[str, ...] = ()
    """Nodes whose SSH host-key fingerprints the guards compare."""
    ports: tuple[tuple[str, int], ...] = ()
    """(node, port) to try with a TCP connect (only on nodes that answered)."""


@dataclass(frozen=True)
class OpsState:
    """Everything a plan is computed from: one fresh observation of the world."""

    config: Config
    snapshot: ClusterSnapshot
    switch_states: Mapping[str, str | None] = field(default_factory=dict)
    """entity -> on/off/unavailable; None when Home Assistant did not answer."""
    power_error: str | None = None
    """Why Home Assistant is unavailable; None when it is available."""
    locks: tuple[RunLock, ...] = ()
    owner_alive: Mapping[str, bool | None] = field(default_factory=dict)
    """node -> is the process holding its lock alive (None: another host)."""
    lock_ages: Mapping[str, float | None] = field(default_factory=dict)
    """node -> seconds since its lock was taken (wall clock; None: unknown)."""
    fingerprints: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[tuple[str, int], bool] = field(default_factory=dict)
    """(node, port) -> did it answer."""
    unfinished: tuple[WorkflowRecord, ...] = ()
    clock: str = ""
    """The clock ``snapshot.taken_at`` is on, as journal entries name it
    (ops/journal.py `clock_of`): a record on another is not compared with it."""

    def holders(self) -> dict[str, str]:
        """node -> who holds its run lock (the runlock guard). A stale lock (its
        owner gone) holds nothing: the workflow takes it over."""
        return {lock.node: lock.describe() for lock in self.locks
                if self.owner_alive.get(lock.node) is not False}

    def stale_locks(self) -> dict[str, str]:
        """node -> its lock whose owner process is gone, as the operator reads it
        (ops/runlocks.py: it holds nothing)."""
        return {lk.node: lk.stale_note(self.lock_ages.get(lk.node)) for lk in self.locks
                if self.owner_alive.get(lk.node) is False}

    def lock(self, node: str) -> RunLock | None:
        return next((lock for lock in self.locks if lock.node == node), None)


class Workflow(Protocol):
    @property
    def kind(self) -> str:
        """serve, stop, power-cycle, power-on, power-off, recover, cluster-power-on|off,
        resume, runlock-close."""

    @property
    def target(self) -> str: ...

    def needs(self, config: Config) -> Needs: ...

    def plan(self, state: OpsState) -> Plan: ...

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        """The steps, inside an open run whose guards passed."""


@dataclass(frozen=True)
class Plan:
    workflow: str
    target: str
    report: GuardReport
    steps: tuple[PlannedStep, ...]
    source: Workflow = field(compare=False, repr=False)
    """The workflow object that made this plan (and runs it)."""
    nodes: tuple[str, ...] = ()
    """Nodes the workflow locks or acts on."""
    entities: tuple[str, ...] = ()
    """Home Assistant entities it switches."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """Journaled with ``begin``."""
    data: Any = field(default=None, compare=False, repr=False)
    """What the workflow's run needs beyond the steps (e.g. the serve's launch plan)."""

    @property
    def allowed(self) -> bool:
        return self.report.allowed

    def to_json(self) -> dict[str, object]:
        """The ``--dry-run --json`` object; scripts read these key names."""
        return {"workflow": self.workflow, "target": self.target, "allowed": self.allowed,
                "verdicts": [verdict_json(v) for v in self.report.verdicts],
                "steps": [s.to_json() for s in self.steps]}

    def changes(self, fresh: Plan) -> list[str]:
        """What differs in ``fresh`` (the same workflow, observed again) that the
        operator did not see: a verdict whose outcome changed, appeared or went away
        refusing, and any step added or removed."""
        out = []
        was = {(v.guard, v.subject): v for v in self.report.verdicts}
        now = {(v.guard, v.subject): v for v in fresh.report.verdicts}
        for key, v in now.items():
            old = was.get(key)
            if old is None:
                if v.refused or v.warning:
                    out.append(f"new: {outcome(v)} {v.message}")
            elif outcome(old) != outcome(v):
                out.append(f"{v.guard} {v.subject}: was {outcome(old)}, now {outcome(v)}: "
                           f"{v.message}")
        for key, v in was.items():
            if key not in now and (v.refused or v.warning):
                out.append(f"gone: {outcome(v)} {v.message}")
        before = [_step_key(s) for s in self.steps]  # each step's key made once:
        after = [_step_key(s) for s in fresh.steps]  # a serve's docker run is long
        was_keys, now_keys = set(before), set(after)
        out += [f"step added: {s.describe()}"
                for s, key in zip(fresh.steps, after, strict=True) if key not in was_keys]
        out += [f"step removed: {s.describe()}"
                for s, key in zip(self.steps, before, strict=True) if key not in now_keys]
        return out


_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def _step_key(s: PlannedStep) -> tuple[str, str, str]:
    """A step as the change check compares it: a figure that moves with the clock
    (a resume's remaining off time) is not a different step; a node is."""
    return s.step, s.target, _NUMBER.sub("#", s.action)


def outcome(v: Verdict) -> str:
    """How a verdict reads, in one word, wherever a plan is shown (the console's
    confirm modal, the CLI's plan, what changed before a run): PASS, WARN,
    OVERRIDDEN or REFUSE."""
    if v.refused:
        return "REFUSE"
    if v.overridden:
        return "OVERRIDDEN"
    return "WARN" if v.warning else "PASS"


def verdict_json(v: Verdict) -> dict[str, object]:
    """One verdict as ``--dry-run --json`` prints it."""
    return {"guard": v.guard, "ok": not v.refused, "overridable": v.override is not None,
            "message": v.message}


def verdict_word(plan: Plan) -> str:
    """The plan's verdict in one line: ``REFUSED (2 refusals; overridable with
    --override fit,kernel)``, ``ALLOWED (1 overridden, 1 warning)``."""
    report = plan.report
    if report.refused:
        n = len(report.refused)
        needed = ",".join(sorted(o.value for o in report.needed_overrides()))
        how = (f"overridable with --override {needed}" if needed and not report.blocking()
               else f"{len(report.blocking())} not overridable")
        return f"REFUSED ({n} refusal{'s' if n > 1 else ''}; {how})"
    notes = [f"{len(vs)} {word}" for vs, word in ((report.overridden, "overridden"),
                                                  (report.warnings, "warning(s)")) if vs]
    return "ALLOWED" + (f" ({', '.join(notes)})" if notes else "")


def dry_run_lines(plan: Plan) -> list[str]:
    """``--dry-run`` as text: the verdict first, then the refusals, every other
    verdict, and every step with its exact command, refused or not (a dry run
    is how a plan is read before the night); the verdict again last, so the
    end of the output (what a terminal leaves in view) says it too."""
    word = verdict_word(plan)
    head = f"{plan.workflow} {plan.target}: {word}"
    out = [head]
    refused = plan.report.refused
    if refused:
        out.append("refused:")
        out += [f"  [REFUSE] {v.guard} {v.subject}: {v.message}" for v in refused]
    others = [v for v in plan.report.verdicts if not v.refused]
    if others:
        out.append("guards:")
        out += [f"  [{outcome(v)}] {v.guard} {v.subject}: {v.message}" for v in others]
    out.append(f"{'would run' if refused else 'will run'} ({len(plan.steps)} steps"
               + (", none runs while refused):" if refused else "):"))
    out += [f"  {i}. {s.describe()}" for i, s in enumerate(plan.steps, 1)]
    out.append(f"verdict: {word}; dry run, nothing was run")
    return out
